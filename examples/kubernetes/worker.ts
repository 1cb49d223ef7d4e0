/**
 * The worker of the Kubernetes example (worker-deployment.yaml): a program of your own that runs svc's
 * worker. What makes it fit a Deployment:
 *
 * - the health listener on SERVICE_HEALTH_ADDR (`0.0.0.0:9464` there) answers the probes: `/healthz`
 *   (liveness) and `/readyz` (readiness);
 * - SIGTERM (and SIGINT) start a drain: `/readyz` turns 503, no job is claimed any more, running jobs get
 *   up to DRAIN_TIMEOUT_MS (default 30000) to finish, then the process exits 0. Keep the pod's
 *   terminationGracePeriodSeconds above it;
 * - DATABASE_URL (and SERVICE_SCHEMA, default `svc`) from the environment.
 *
 * Run: DATABASE_URL=postgres://... SERVICE_HEALTH_ADDR=127.0.0.1:9464 deno run -A examples/kubernetes/worker.ts
 */
import { createWorker } from "../../mod.ts";

const drainTimeout = Number(Deno.env.get("DRAIN_TIMEOUT_MS") || 30_000);
if (!Number.isInteger(drainTimeout) || drainTimeout < 0) {
  console.error(
    `error: DRAIN_TIMEOUT_MS must be a number of milliseconds, not ${Deno.env.get("DRAIN_TIMEOUT_MS")}`,
  );
  Deno.exit(2);
}

const worker = createWorker({
  schema: Deno.env.get("SERVICE_SCHEMA") || "svc",
  queues: { default: { maxWorkers: 10 } },
  handlers: {
    // An example job: waits `ms` milliseconds (at most a minute), like a handler doing slow work.
    "example.wait": async (job) => {
      const ms = Math.min(Number(job.args.ms) || 0, 60_000);
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { waited: ms };
    },
  },
});

try {
  await worker.start(); // refuses an unmigrated schema: run the migrate Job first
} catch (e) {
  console.error(`error: ${(e as Error).message}`);
  Deno.exit(1);
}
console.log(`worker: started (drain timeout ${drainTimeout} ms)`);

let draining = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.addSignalListener(signal, async () => {
    if (draining) return;
    draining = true;
    console.log(`worker: ${signal}, draining for up to ${drainTimeout} ms`);
    await worker.shutdown(drainTimeout);
    console.log("worker: stopped");
    Deno.exit(0);
  });
}

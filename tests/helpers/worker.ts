/** Test helpers for workers: fast timings, a silent logger, and guaranteed shutdown. */
import { createWorker, silentLogger, type Worker, type WorkerOptions } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";
import { svcMetrics } from "../../src/metrics/svc_metrics.ts";
import { flatten, parsePrometheus, seriesKey } from "./prometheus.ts";

/** Fast timings for tests. */
export const FAST = {
  pollInterval: 100,
  heartbeatInterval: 200,
  rescueAfter: 1_000,
  leaderElectionInterval: 200,
  maintenanceInterval: 50,
};

/** Starts a worker on the client's schema with fast timings; `stop` shuts it down (idempotent). */
export async function startWorker(
  client: Client,
  opts: Partial<WorkerOptions>,
): Promise<{ worker: Worker; stop: (drain?: number) => Promise<void> }> {
  const worker = createWorker({
    client,
    schema: client.schema,
    queues: { default: { maxWorkers: 5 } },
    logger: silentLogger,
    maxConnections: 10,
    ...FAST,
    ...opts,
  });
  await worker.start();
  return { worker, stop: (drain = 1000) => worker.shutdown(drain) };
}

/**
 * The claim statements this process's workers have run on `queue` (the count of the
 * svc_claim_duration_seconds histogram). A negative check waits for two more of them (a claim that found
 * nothing to take, and the next) instead of a guessed pause.
 */
export async function claimsRun(queue = "default"): Promise<number> {
  const all = flatten(parsePrometheus(await svcMetrics().registry.text()));
  return all.get(seriesKey("svc_claim_duration_seconds_count", { queue })) ?? 0;
}

/**
 * Fleet-wide limits across a database restart (ADR 019): two workers under a concurrency limit of 2 while
 * the server is stopped mid-run (claims, completions and heartbeats in flight) and started again. The
 * handlers record their start and return in this process, so the overlap is measured exactly.
 */
import assert from "node:assert/strict";
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import { freshSchema, TEST_ENGINE, waitFor } from "../helpers/db.ts";
import { startCluster } from "../helpers/pg_cluster.ts";
import { FAST } from "../helpers/worker.ts";

/** The most intervals that overlap at one instant. */
function mostAtOnce(xs: { start: number; end: number }[]): number {
  const edges = xs.flatMap((x) => [[x.start, 1], [x.end, -1]] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at the same instant
  let now = 0, most = 0;
  for (const [, d] of edges) most = Math.max(most, now += d);
  return most;
}

/**
 * Two workers under a concurrency limit of 2 over 60 jobs of 40 ms; the server is stopped immediately once ten
 * have run and started again after `outageMs`. Returns the handlers' recorded intervals and when the server
 * was back.
 */
async function runAcrossRestart(outageMs: number) {
  const pg = await startCluster();
  const schema = freshSchema("limout");
  const clients = [0, 1, 2].map(() =>
    createClient({ databaseUrl: pg.url, schema, maxConnections: 4, connectTimeout: 2 })
  );
  const intervals: { id: number; lease: number; start: number; end: number }[] = [];
  const workers = clients.slice(1).map((client) =>
    createWorker({
      client,
      schema,
      queues: { default: { maxWorkers: 4 } },
      logger: silentLogger,
      maxConnections: 4,
      ...FAST,
      // An outcome is retried through the outage; a claim that committed while its answer was lost with the
      // connection is rescued after 8 s and runs then. When the outage outlasts rescueAfter (heartbeats fail
      // while the server is down), an attempt whose outcome was still on its way is rescued and its job runs
      // again, as a new attempt (at least once, never one attempt twice).
      heartbeatInterval: 500,
      rescueAfter: 8_000,
      engines: TEST_ENGINE === "canonical" ? ["canonical"] : undefined,
      handlers: {
        slow: async (job) => {
          const start = Date.now();
          await new Promise((r) => setTimeout(r, 40));
          intervals.push({ id: job.id, lease: job.lease, start, end: Date.now() });
        },
      },
    })
  );
  try {
    await clients[0].migrate({ engine: TEST_ENGINE });
    await clients[0].setQueueLimit("default", { concurrency: 2 });
    const jobs = await clients[0].enqueueMany(
      Array.from({ length: 60 }, (_, i) => ({ kind: "slow", args: { i } })),
    );
    for (const w of workers) await w.start();
    await waitFor(() => intervals.length >= 10, 20_000, "ten jobs to run");
    await pg.stop("immediate"); // mid-statement: claims and completions in flight fail
    await new Promise((r) => setTimeout(r, outageMs));
    await pg.start();
    const backAt = Date.now();
    let final: (Awaited<ReturnType<typeof clients[0]["getJob"]>>)[] = [];
    await waitFor(
      async () => {
        final = await Promise.all(jobs.map((j) => clients[0].getJob(j.id).catch(() => null)));
        return final.every((j) => j?.state === "completed");
      },
      90_000,
      "all 60 completed",
    );
    // What ended each earlier attempt of a job (a rescue, a failed outcome write), for the messages below.
    const why = new Map(final.map((j) => [j!.id, JSON.stringify(j!.errors)]));
    const most = mostAtOnce(intervals);
    assert.ok(most <= 2, `at most 2 at once (got ${most})`);
    assert.equal(most, 2, "both units were used");
    // Every job ran; no attempt (job and lease) ran twice.
    assert.equal(new Set(intervals.map((i) => i.id)).size, 60, "every job ran");
    assert.equal(
      new Set(intervals.map((i) => `${i.id}:${i.lease}`)).size,
      intervals.length,
      "no attempt ran twice",
    );
    return { intervals, backAt, why };
  } finally {
    await Promise.all(workers.map((w) => w.shutdown(1_000).catch(() => {})));
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await pg.destroy();
  }
}

Deno.test("limits: a concurrency limit of 2 holds for two workers across a database restart; nothing is lost", async () => {
  await runAcrossRestart(1_500);
});

Deno.test("limits: across an outage longer than rescueAfter the limit holds, and an attempt claimed after it is not rescued", async () => {
  // 12 s down, rescueAfter 8 s: every runtime's heartbeat is stale when the server is back, and a worker
  // claims again before its next heartbeat lands. A claim is a sign of life: the leader rescues only
  // batches claimed more than rescueAfter ago, so an attempt claimed after the outage is neither run twice
  // nor freed from the limit while its handler runs.
  const { intervals, backAt, why } = await runAcrossRestart(12_000);
  const runs = new Map<number, { start: number }[]>();
  for (const i of intervals) runs.set(i.id, [...(runs.get(i.id) ?? []), i]);
  const after = [...runs].filter(([, rs]) => Math.min(...rs.map((r) => r.start)) >= backAt);
  assert.ok(after.length > 0, "jobs ran after the outage");
  for (const [id, rs] of after) {
    assert.equal(
      rs.length,
      1,
      `job ${id}, first run after the outage, ran once (back at ${backAt}; runs ${
        JSON.stringify(rs)
      }; errors ${why.get(id)})`,
    );
  }
});

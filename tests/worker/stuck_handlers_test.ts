/**
 * A handler aborted by its deadline or a cancel that ignores `ctx.signal`: its attempt ends at once, but
 * its slot stays taken until its code returns, so real concurrency never exceeds maxWorkers. Past the
 * stuck grace it is logged, counted by svc_jobs_stuck and named in the runtime's heartbeat; shutdown
 * waits at most the grace for it and names it.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { flatten, parsePrometheus, seriesKey } from "../helpers/prometheus.ts";
import { svcMetrics } from "../../src/metrics/svc_metrics.ts";
import type { Logger } from "../../mod.ts";

function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const keep = (...a: unknown[]) => void lines.push(a.map(String).join(" "));
  return { logger: { debug: () => {}, info: keep, warn: keep, error: keep }, lines };
}

async function stuckGauge(queue: string): Promise<number | undefined> {
  const all = flatten(parsePrometheus(await svcMetrics().registry.text()));
  return all.get(seriesKey("svc_jobs_stuck", { queue }));
}

Deno.test("a handler that ignores its deadline keeps its slot until it returns; past the grace it is reported stuck", async () => {
  const { client, drop } = await testClient();
  const { logger, lines } = recordingLogger();
  let running = 0;
  let most = 0;
  let release!: () => void;
  const released = new Promise<void>((r) => release = r);
  const started: number[] = [];
  const w = await startWorker(client, {
    queues: { stuck_q: { maxWorkers: 1 } },
    logger,
    stuckGrace: 300,
    handlers: {
      // Ignores ctx.signal: returns only when the test says so.
      spin: {
        timeout: 200,
        maxAttempts: 1,
        handler: async () => {
          running++;
          most = Math.max(most, running);
          await released;
          running--;
        },
      },
      quick: (job) => {
        running++;
        most = Math.max(most, running);
        started.push(job.id);
        running--;
      },
    },
  });
  try {
    const spin = await client.enqueue("spin", {}, { queue: "stuck_q" });
    await waitFor(() => running === 1, 10_000, "spin to start");
    const quick = await client.enqueue("quick", {}, { queue: "stuck_q" });
    // The deadline ends the attempt at once (failed: one attempt) while the handler still runs.
    const failed = await waitFor(
      async () => {
        const j = await client.getJob(spin.id);
        return j?.state === "failed" ? j : null;
      },
      10_000,
      "the deadline to fail the attempt",
    );
    assert.match(failed!.errors[0].error, /deadline exceeded/);
    // Past the grace: logged, counted, and named by the heartbeat.
    await waitFor(
      () => lines.some((l) => /job \d+ .*has not returned 300 ms after its abort \(deadline\)/.test(l)),
      10_000,
      "the stuck warning",
    );
    assert.equal(await stuckGauge("stuck_q"), 1);
    const named = await waitFor(
      async () => {
        const rt = (await client.engine.listRuntimes(60_000)).find((r) => r.id === w.worker.id);
        return rt?.stuckHandlers?.length ? rt.stuckHandlers : null;
      },
      10_000,
      "the heartbeat to name the stuck handler",
    );
    assert.deepEqual(
      named!.map((h) => [h.job_id, h.kind, h.queue, h.reason]),
      [[spin.id, "spin", "stuck_q", "deadline"]],
    );
    // Its slot is still taken: the queued job has not started.
    assert.equal((await client.getJob(quick.id))?.state, "available");
    assert.deepEqual(started, []);
    // It returns: the slot frees, the next job runs, the report clears.
    release();
    await waitFor(async () => (await client.getJob(quick.id))?.state === "completed", 10_000, "quick to run");
    assert.equal(most, 1, "never more than maxWorkers handlers running");
    assert.ok(lines.some((l) => /the stuck handler of job \d+ returned/.test(l)), lines.join("\n"));
    assert.equal(await stuckGauge("stuck_q"), 0);
    await waitFor(
      async () => {
        const rt = (await client.engine.listRuntimes(60_000)).find((r) => r.id === w.worker.id);
        return rt !== undefined && (rt.stuckHandlers ?? []).length === 0;
      },
      10_000,
      "the heartbeat to stop naming it",
    );
  } finally {
    release();
    await w.stop();
    await drop();
  }
});

Deno.test("shutdown waits at most the stuck grace for a cancelled handler that does not return, and names it", async () => {
  const { client, drop } = await testClient();
  const { logger, lines } = recordingLogger();
  let release!: () => void;
  const released = new Promise<void>((r) => release = r);
  const w = await startWorker(client, {
    queues: { stuck_s: { maxWorkers: 2 } },
    logger,
    stuckGrace: 400,
    handlers: { spin: () => released },
  });
  try {
    const job = await client.enqueue("spin", {}, { queue: "stuck_s" });
    await waitFor(async () => (await client.getJob(job.id))?.state === "running", 10_000, "spin to start");
    await client.cancel(job.id);
    await waitFor(
      () => lines.some((l) => /has not returned 400 ms after its abort \(cancelled\)/.test(l)),
      10_000,
      "the stuck warning",
    );
    const t0 = performance.now();
    await w.stop(100);
    const ms = performance.now() - t0;
    // At least the drain timeout and the grace; it ended while the handler had still not returned (it
    // returns only at release() below), which is the point. The upper bound only says "did not hang": a
    // loaded CI machine took 5.2 s for the 0.5 s of timers and the closing statements.
    assert.ok(ms >= 350 && ms < 60_000, `shutdown took ${Math.round(ms)} ms`);
    assert.ok(
      lines.some((l) =>
        new RegExp(`shutting down with 1 handler\\(s\\) that did not return.*job ${job.id} \\(spin\\)`).test(
          l,
        )
      ),
      lines.join("\n"),
    );
    assert.equal((await client.getJob(job.id))?.state, "cancelled");
  } finally {
    release();
    await w.stop();
    await drop();
  }
});

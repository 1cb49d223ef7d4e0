/**
 * The runtime on the embedded driver (PGlite 0.5 = PostgreSQL 18, one in-process session): handler
 * outcomes, wake-ups, cancel and callbacks through in-process NOTIFY, unique jobs, transactional
 * enqueue, leader duties (promotion, rescue of a stale attempt, cron), one leader among two workers
 * sharing the driver, pause/resume, bulk operations and the cluster health.
 */
import assert from "node:assert/strict";
import { openPglite } from "../../src/db/pglite_driver.ts";
import { createClient, type Job, type JobContext, snooze, TerminalError } from "../../mod.ts";
import { waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";

Deno.test("embedded PGlite: the runtime end to end", async (t) => {
  const { driver } = await openPglite();
  const client = createClient({ driver });
  await client.migrate();
  assert.deepEqual((await client.migrate()).applied, [], "migrations are idempotent");
  const state = async (id: number) => (await client.getJob(id))!;
  const finished = (id: number) => async () => {
    const j = await state(id);
    return ["completed", "failed", "cancelled"].includes(j.state) ? j : null;
  };

  let flaky = 0;
  let snoozed = 0;
  let abortReason: unknown = null;
  const handlers = {
    ok: (job: Job) => ({ doubled: (job.args.n as number) * 2 }),
    flaky: {
      handler: () => (++flaky < 3 ? Promise.reject(new Error(`flake ${flaky}`)) : "done"),
      backoff: () => 20,
    },
    terminal: () => {
      throw new TerminalError("bad input");
    },
    snoozer: () => (++snoozed === 1 ? snooze(50) : "woke"),
    slow: (_: Job, ctx: JobContext) =>
      new Promise((resolve) => {
        ctx.signal.addEventListener("abort", () => resolve(abortReason = ctx.signal.reason));
      }),
    approve: async (_: Job, ctx: JobContext) => {
      const id = await ctx.registerCallback({ timeout: 10_000 });
      await client.enqueue("ok", { n: 0, callbackId: id }, { queue: "side" });
      return { answer: await ctx.waitForCallback(id) };
    },
  };
  const a = await startWorker(client, {
    handlers,
    queues: { default: { maxWorkers: 5 }, side: { maxWorkers: 1 } },
    cron: { every_second: { schedule: "* * * * * *", kind: "ok", args: { n: 1 }, queue: "side" } },
  });
  const b = await startWorker(client, {
    handlers,
    queues: { other: { maxWorkers: 1 } },
    pollInterval: 30_000,
  });
  try {
    await t.step("handler outcomes: result, retries, TerminalError, snooze", async () => {
      const [ok, fl, te, sn] = await client.enqueueMany([
        { kind: "ok", args: { n: 21 } },
        { kind: "flaky", args: {} },
        { kind: "terminal", args: {} },
        { kind: "snoozer", args: {} },
      ]);
      assert.deepEqual((await waitFor(finished(ok.id), 10_000, "ok"))!.result, { doubled: 42 });
      const f = (await waitFor(finished(fl.id), 10_000, "flaky"))!;
      assert.deepEqual([f.state, f.attempt, f.errors.map((e) => e.error)], ["completed", 3, [
        "flake 1",
        "flake 2",
      ]]);
      const t = (await waitFor(finished(te.id), 10_000, "terminal"))!;
      assert.deepEqual([t.state, t.attempt, t.errors[0].terminal], ["failed", 1, true]);
      const s = (await waitFor(finished(sn.id), 10_000, "snoozer"))!;
      assert.deepEqual([s.state, s.attempt, s.result], ["completed", 1, "woke"]);
    });

    await t.step(
      "an insert wakes an idle worker through its NOTIFY (the worker's poll is 30 s)",
      async () => {
        await new Promise((r) => setTimeout(r, 200)); // b is idle in its poll wait
        const j = await client.enqueue("ok", { n: 4 }, { queue: "other" });
        const t0 = Date.now();
        assert.equal((await waitFor(finished(j.id), 5_000, "the woken job"))!.state, "completed");
        assert.ok(Date.now() - t0 < 3_000, `${Date.now() - t0} ms`);
      },
    );

    await t.step("cancel reaches the running handler through in-process NOTIFY", async () => {
      const j = await client.enqueue("slow", {});
      await waitFor(async () => (await state(j.id)).state === "running", 10_000, "running");
      assert.equal((await client.cancel(j.id)).state, "cancelled");
      await waitFor(() => abortReason !== null, 3_000, "the abort signal");
      assert.equal(abortReason, "cancelled");
    });

    await t.step("in-process callback: resumeExternal wakes the waiting handler", async () => {
      const j = await client.enqueue("approve", {});
      const side = await waitFor(
        async () => {
          const { jobs } = await client.listJobs({ queue: "side", kind: "ok" });
          return jobs.find((x) => x.args.callbackId);
        },
        10_000,
        "the callback id",
      );
      await waitFor(async () => (await state(j.id)).state === "waiting_external", 5_000, "parked");
      const t0 = Date.now();
      await client.resumeExternal(side!.args.callbackId as string, { approved: true });
      const done = (await waitFor(finished(j.id), 5_000, "approve"))!;
      assert.deepEqual(done.result, { answer: { approved: true } });
      assert.ok(Date.now() - t0 < 2_000, `woken by NOTIFY, not by a poll (${Date.now() - t0} ms)`);
    });

    await t.step("unique jobs and transactional enqueue", async () => {
      const unique = { byArgs: true };
      const first = await client.enqueue("slow", { k: 1 }, { queue: "parked", unique });
      const again = await client.enqueue("slow", { k: 1 }, { queue: "parked", unique });
      assert.equal(again.id, first.id);
      assert.equal(again.duplicate, true);
      await assert.rejects(client.transaction(async (tx) => {
        await tx.enqueue("ok", { n: 1 }, { queue: "parked", tags: ["rolled-back"] });
        await tx.db.query("select 1");
        throw new Error("roll back");
      }));
      assert.equal((await client.listJobs({ tag: "rolled-back" })).jobs.length, 0);
      const kept = await client.transaction((tx) => tx.enqueue("ok", { n: 2 }, { queue: "parked" }));
      assert.equal((await state(kept.id)).state, "available");
    });

    await t.step(
      "leader: one of the two workers; promotion, cron and rescue of a stale attempt",
      async () => {
        await waitFor(() => a.worker.isLeader || b.worker.isLeader, 5_000, "a leader");
        assert.equal([a.worker.isLeader, b.worker.isLeader].filter(Boolean).length, 1, "one leader");
        const later = await client.enqueue("ok", { n: 5 }, { runAt: new Date(Date.now() + 300) });
        assert.equal(later.state, "scheduled");
        assert.equal((await waitFor(finished(later.id), 10_000, "the scheduled job"))!.state, "completed");
        const fired = await waitFor(
          async () => {
            const { jobs } = await client.listJobs({ queue: "side", kind: "ok", state: "completed" });
            return jobs.find((j) => j.metadata.cron === "every_second");
          },
          10_000,
          "a cron job",
        );
        assert.ok(fired!.metadata.cron_fire_at);
        const [stale] = await client.db.query(
          `insert into ${client.names.q}.jobs (kind, queue, args, state, attempt, lease, heartbeat_at, attempted_at)
         values ('ok', 'default', '{"n": 3}', 'running', 1, 1, now() - interval '1 hour', now() - interval '1 hour')
         returning id`,
        );
        const r = (await waitFor(finished(Number(stale.id)), 10_000, "the rescued job"))!;
        assert.deepEqual([r.state, r.attempt, r.errors[0].error], [
          "completed",
          2,
          "rescued: heartbeat stale: worker presumed dead",
        ]);
      },
    );

    await t.step("pause/resume, bulk cancel, runtimes and health", async () => {
      await client.pauseQueue("parked");
      assert.equal((await client.listQueues()).find((q) => q.name === "parked")!.paused, true);
      await client.resumeQueue("parked");
      assert.equal(await client.bulkCancel({ queue: "parked" }), 2);
      const runtimes = await client.listRuntimes();
      assert.equal(runtimes.length, 2);
      assert.equal(runtimes.filter((r) => r.leader).length, 1);
      const h = await client.healthCheck();
      assert.deepEqual([h.ready, h.live_runtimes, h.schema_version], [true, 2, h.expected_schema_version]);
    });
  } finally {
    await b.stop();
    await a.stop();
    await client.close();
    await driver.close();
  }
});

/**
 * Fleet-wide rate limits (ADR 019): the limits row and its setter, the claim's budget and throttled answer on
 * the engine under test, a worker's seeding and waiting, and the mixed storage transition (the three-process
 * tests are in limits_processes_test.ts).
 */
import assert from "node:assert/strict";
import {
  ageClaims,
  allJobsSql,
  canonicalDb,
  liveRuntime,
  liveRuntimeBoth,
  staleRuntime,
  TEST_ENGINE,
  waitFor,
  withSchema,
} from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";
import { ValidationError } from "../../src/errors.ts";
import type { Client } from "../../src/client/client.ts";
import { createWorker } from "../../mod.ts";
import { startWorker } from "../helpers/worker.ts";
import { svcMetrics } from "../../src/metrics/svc_metrics.ts";
import { flatten, parsePrometheus, seriesKey } from "../helpers/prometheus.ts";

/** Puts a queue's rate in force now, as if it had been counting claims for an hour (none were made). */
async function rateInForce(client: Client, queue: string): Promise<void> {
  await client.sql.unsafe(
    `update "${client.schema}".queue_limits set rate_logged_since = now() - interval '1 hour' where queue = $1`,
    [queue],
  );
}

Deno.test("limits: the setter validates, seeds only a queue without a row, clears and resets", () =>
  withSchema(async (client) => {
    const bad: [unknown, RegExp][] = [
      [{ rate: 5 }, /rate and limit.per go together/],
      [{ per: 1000 }, /go together/],
      [{ rate: 0, per: 1000 }, /limit.rate must be an integer from 1/],
      [{ rate: 1.5, per: 1000 }, /limit.rate must be an integer/],
      [{ rate: 5, per: 86_400_001 }, /limit.per \(ms\) must be an integer from 1 to 86400000/],
      [{ rate: 5, per: 1000, burst: 3 }, /unknown field burst/],
      [{ countParked: "yes" }, /countParked must be true or false/],
      [[], /limit must be an object/],
      [{ concurrency: 0 }, /limit.concurrency must be an integer from 1/],
      [{ perKey: { concurrency: 0 } }, /limit.perKey.concurrency must be an integer from 1/],
    ];
    for (const [limit, re] of bad) {
      await assert.rejects(
        client.setQueueLimit("mail", limit as never),
        (e) => e instanceof ValidationError && re.test(e.message),
        JSON.stringify(limit),
      );
    }
    await assert.rejects(client.setQueueLimit("bad name!", { rate: 1, per: 1 }), ValidationError);
    assert.deepEqual(await client.listQueueLimits(), [], "nothing written by a refused limit");

    const set = await client.setQueueLimit("mail", { rate: 20, per: 1000 }, { setBy: "test" });
    assert.equal(set.rate, 20);
    assert.equal(set.per, 1000);
    assert.equal(set.setBy, "test");
    assert.ok(
      set.rateInForceAt && set.rateInForceAt.getTime() > Date.now() - 5_000,
      "in force one window later",
    );
    const [q] = await client.sql.unsafe(`select limited from "${client.schema}".queues where name = 'mail'`);
    assert.equal(q.limited, true);

    // A worker's option seeds only a queue without a row (the SQL function its start calls): the row wins.
    const [kept] = await client.sql.unsafe(
      `select "${client.schema}".set_queue_limit('mail', '{"rate":99,"per_ms":1}', 'w1', true) as j`,
    );
    assert.equal(kept.j.rate, 20, "the stored row wins over a seed");
    const [fresh] = await client.sql.unsafe(
      `select "${client.schema}".set_queue_limit('other', '{"rate":7,"per_ms":500}', 'w1', true) as j`,
    );
    assert.equal(fresh.j.rate, 7, "a queue without a row is seeded");
    assert.equal(fresh.j.set_by, "w1");

    const cleared = await client.setQueueLimit("mail", {});
    assert.equal(cleared.rate, null);
    const [q2] = await client.sql.unsafe(`select limited from "${client.schema}".queues where name = 'mail'`);
    assert.equal(q2.limited, false, "a row without limits leaves the claim unlimited");
    assert.equal((await client.listQueueLimits()).length, 2, "the cleared row is kept");
    assert.equal(await client.resetQueueLimit("mail"), true);
    assert.equal(await client.resetQueueLimit("mail"), false);
    assert.deepEqual((await client.listQueueLimits()).map((l) => l.queue), ["other"]);
  }));

Deno.test("limits: a rate cuts claims short, answers why and when, and counts held jobs", () =>
  withSchema(async (client) => {
    await client.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ kind: "k", args: { i }, queue: "r" })));
    await client.setQueueLimit("r", { rate: 5, per: 60_000 });
    await rateInForce(client, "r");
    const first = await client.engine.claim({
      queue: "r",
      limit: 8,
      free: 2, // six of them would be held: held jobs count as claims
      runtimeId: "t",
      policies: {},
      callbackTimeoutsMs: {},
      prefetchTtlMs: 10_000,
    });
    assert.equal(first.length, 5, "the claim takes what the rate leaves");
    assert.equal(first.filter((j) => j.prefetched).length, 3, "the first `free` start, the rest are held");
    assert.equal(first.throttle?.limit, "rate");
    assert.equal(first.throttle?.inUse, 5);
    const retryAt = first.throttle!.retryAt!.getTime();
    assert.ok(
      retryAt > Date.now() + 50_000 && retryAt < Date.now() + 61_000,
      "room again when the claim leaves the window",
    );
    const second = await claim(client, "r", 10, "t");
    assert.equal(second.length, 0);
    assert.equal(second.throttle?.limit, "rate");
    assert.equal(second.throttle?.inUse, 5);
    const [info] = await client.listQueueLimits();
    assert.equal(info.inUse.rate, 5);

    // A raised limit applies at the next claim; a removed one ends the throttling.
    await client.setQueueLimit("r", { rate: 7, per: 60_000 });
    const third = await claim(client, "r", 10, "t");
    assert.equal(third.length, 2);
    assert.equal(third.throttle?.limit, "rate");
    await client.resetQueueLimit("r");
    const fourth = await claim(client, "r", 10, "t");
    assert.equal(fourth.length, 10);
    assert.equal(fourth.throttle, undefined);
    const [log] = await client.sql.unsafe(`select count(*)::int as n from "${client.schema}".limit_log`);
    assert.equal(log.n, 0, "a queue without a rate keeps no log");
  }));

Deno.test("limits: a new rate counts claims for one window before it is enforced", () =>
  withSchema(async (client) => {
    await client.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ kind: "k", args: { i }, queue: "c" })));
    const set = await client.setQueueLimit("c", { rate: 3, per: 60_000 });
    assert.ok(set.rateInForceAt!.getTime() > Date.now() + 50_000, "in force one window after it was set");
    const a = await claim(client, "c", 4, "t");
    assert.equal(a.length, 4, "counting, not enforced yet");
    assert.equal(a.throttle, undefined);
    assert.equal((await claim(client, "c", 2, "t")).length, 2, "still counting");
    // Once a whole window has been counted (moved back here instead of waited for), the six claims counted
    // are in the window: nothing more until they leave it. (The window is a minute, so that no claim leaves
    // it while the test runs: with 400 ms it raced the claim's own clock on a busy machine.)
    await rateInForce(client, "c");
    const b = await claim(client, "c", 5, "t");
    assert.equal(b.length, 0, "the counted claims are in the window");
    assert.equal(b.throttle?.limit, "rate");
    assert.equal(b.throttle?.inUse, 6);
  }));

Deno.test("limits: the claim of a paused queue takes nothing and writes no log row", () =>
  withSchema(async (client) => {
    await client.enqueue("k", {}, { queue: "p" });
    await client.setQueueLimit("p", { rate: 5, per: 1000 });
    await rateInForce(client, "p");
    await client.pauseQueue("p");
    assert.equal((await claim(client, "p", 5, "t")).length, 0);
    const [log] = await client.sql.unsafe(`select count(*)::int as n from "${client.schema}".limit_log`);
    assert.equal(log.n, 0);
  }));

Deno.test("limits: a worker's limit option seeds a queue without a row, and its claims wait for the window", () =>
  withSchema(async (client) => {
    assert.throws(
      () => createWorker({ client, queues: { s: { limit: { rate: 5 } } }, handlers: {} }),
      (e) =>
        e instanceof ValidationError && /queues\.s\.limit\.rate and limit\.per go together/.test(e.message),
    );
    const starts: number[] = [];
    const before = await throttledCount("s");
    const { worker, stop } = await startWorker(client, {
      queues: { s: { maxWorkers: 10, limit: { rate: 4, per: 500 } } },
      handlers: { k: () => void starts.push(Date.now()) },
    });
    try {
      const [info] = await client.listQueueLimits();
      assert.equal(info.queue, "s");
      assert.equal(info.rate, 4);
      assert.equal(info.setBy, worker.id, "seeded by the runtime");
      await rateInForce(client, "s");
      await client.enqueueMany(
        Array.from({ length: 12 }, (_, i) => ({ kind: "k", args: { i }, queue: "s" })),
      );
      await waitFor(() => starts.length === 12, 15_000, "12 started");
      // 12 jobs at 4 per 500 ms: three windows, so the last claim is at least a full window after the first.
      // (The claims' own times: a handler may start later than its claim, the first ones most, on a busy
      // machine, which once made the handlers' starts span 873 ms.)
      const claims = (await client.sql.unsafe(
        `select extract(epoch from claimed_at) * 1000 as at from ${allJobsSql(client.schema)} j
          where queue = 's' and claimed_at is not null order by claimed_at`,
      )).map((r) => Number(r.at));
      assert.equal(claims.length, 12);
      assert.ok(
        claims[11] - claims[0] >= 1_000 - 50,
        `spread over the windows (${claims[11] - claims[0]} ms)`,
      );
      for (let i = 0; i + 4 < claims.length; i++) {
        assert.ok(claims[i + 4] - claims[i] >= 500 - 50, `no five claims within one window (at ${i})`);
      }
      assert.ok(
        (await throttledCount("s")) > before,
        "svc_limit_throttled_total counted the throttled claims",
      );
      // While its claims are cut short, the runtime's heartbeat says so (the Running page shows it).
      await client.enqueueMany(
        Array.from({ length: 40 }, (_, i) => ({ kind: "k", args: { i }, queue: "s" })),
      );
      const reported = await waitFor(
        async () => (await client.listRuntimes()).find((r) => r.id === worker.id)?.throttled?.[0],
        5_000,
        "the heartbeat's throttled queue",
      );
      assert.equal(reported!.queue, "s");
      // The leader reads each limit's use at collection: svc_limit_in_use{queue, limit="rate"}.
      const inUse = await waitFor(
        async () => {
          const all = flatten(parsePrometheus(await svcMetrics().registry.text()));
          return all.get(seriesKey("svc_limit_in_use", { queue: "s", limit: "rate" }));
        },
        10_000,
        "the limit's use gauge",
      );
      assert.ok(inUse! >= 1 && inUse! <= 4, `jobs claimed in the window (${inUse})`);
      assert.equal(reported!.limit, "rate");
      assert.ok(Date.parse(reported!.since) <= Date.now());
    } finally {
      await stop();
    }
  }));

/** svc_limit_throttled_total{queue, limit="rate"} of this process. */
async function throttledCount(queue: string): Promise<number> {
  const all = flatten(parsePrometheus(await svcMetrics().registry.text()));
  return all.get(seriesKey("svc_limit_throttled_total", { queue, limit: "rate" })) ?? 0;
}

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name: "limits: while the storage transition is mixed, both engines' claims count in one window",
  fn: () =>
    canonicalDb(async (client) => {
      await client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ kind: "k", args: { i }, queue: "m" })));
      await liveRuntimeBoth(client, "both:1");
      for (const step of ["prepare", "enter-mixed-transition"] as const) {
        assert.equal((await client.storageStep(step)).outcome, "changed", step);
      }
      await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ kind: "k", args: { i }, queue: "m" })));
      const [where] = await client.sql.unsafe(
        `select (select count(*) from "${client.schema}".jobs where queue = 'm')::int as canonical,
                (select count(*) from "${client.schema}_qs".jobs where queue = 'm')::int as qs`,
      );
      assert.deepEqual([where.canonical, where.qs], [3, 6], "jobs on both engines");
      await client.setQueueLimit("m", { rate: 5, per: 60_000 });
      await rateInForce(client, "m");
      const a = await claim(client, "m", 4, "t");
      const b = await claim(client, "m", 4, "t");
      assert.equal(a.length + b.length, 5, "five claims in the window, whichever engine held the jobs");
      assert.equal(b.throttle?.limit, "rate");
      const c = await claim(client, "m", 4, "t");
      assert.equal(c.length, 0);
      const [log] = await client.sql.unsafe(
        `select sum(n)::int as n from "${client.schema}".limit_log where queue = 'm'`,
      );
      assert.equal(log.n, 5);
    }),
});

Deno.test({
  name: "limits: a concurrency limit counts running and held attempts and frees a unit at each end",
  fn: () =>
    (TEST_ENGINE === "canonical" ? withSchema : canonicalDb)(async (client) => {
      if (TEST_ENGINE === "queue_storage") await activeQueueStorage(client);
      await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ kind: "k", args: { i }, queue: "c" })));
      const set = await client.setQueueLimit("c", { concurrency: 2 }, { setBy: "test" });
      assert.equal(set.concurrency, 2);
      assert.equal(set.inUse.concurrency, 0);
      const first = await client.engine.claim({
        queue: "c",
        limit: 5,
        free: 1, // the second is held: it holds a unit too
        runtimeId: "t",
        policies: {},
        callbackTimeoutsMs: {},
        prefetchTtlMs: 10_000,
      });
      assert.equal(first.length, 2);
      assert.equal(first.filter((j) => j.prefetched).length, 1);
      assert.deepEqual(first.throttle, { limit: "concurrency", inUse: 2, retryAt: null });
      const none = await claim(client, "c", 5, "t");
      assert.equal(none.length, 0);
      assert.equal(none.throttle?.limit, "concurrency");
      assert.equal((await client.listQueueLimits())[0].inUse.concurrency, 2);

      // An attempt that ends frees its unit for the next claim.
      assert.deepEqual(
        await client.engine.complete([{
          id: first[0].id,
          lease: first[0].lease,
          result: null,
          startedAt: new Date(),
        }], {
          keepCompleted: true,
        }),
        [first[0].id],
      );
      const next = await claim(client, "c", 5, "t");
      assert.equal(next.length, 1);
      assert.equal(next.throttle?.limit, "concurrency");

      // A raised limit applies at the next claim.
      await client.setQueueLimit("c", { concurrency: 4 });
      assert.equal((await claim(client, "c", 5, "t")).length, 2);

      if (TEST_ENGINE === "queue_storage") return;
      // The storage transition does not begin while a concurrency limit is set.
      await liveRuntimeBoth(client, "both:1");
      const step = await client.storageStep("prepare");
      assert.equal(step.outcome, "blocked");
      assert.match(step.message, /concurrency limits on c, which the transition does not carry/);
      await client.setQueueLimit("c", {});
      assert.equal((await client.storageStep("prepare")).outcome, "changed");
      await assert.rejects(
        client.setQueueLimit("c", { concurrency: 1 }),
        (e) =>
          e instanceof ValidationError &&
          /not available while the storage transition is under way \(prepared\)/.test(e.message),
      );
    }),
});

/** Takes a canonical test database through the storage transition to queue storage (`active`). */
async function activeQueueStorage(client: Client): Promise<void> {
  await liveRuntimeBoth(client, "both:1");
  for (const step of ["prepare", "enter-mixed-transition", "finalize"] as const) {
    assert.equal((await client.storageStep(step)).outcome, "changed", step);
  }
}

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a concurrency limit starts from the attempts open when it is set, counts parked ones, and its log keeps one row",
  fn: () =>
    withSchema(async (client) => {
      const qs = `"${client.schema}_qs"`;
      await client.enqueueMany(
        Array.from({ length: 12 }, (_, i) => ({ kind: "k", args: { i }, queue: "p" })),
      );
      // Three attempts open before the limit: one to be parked in-process, one parked for HTTP, one running.
      const before = await claim(client, "p", 3, "t", {}, {});
      assert.equal(before.length, 3);
      const set = await client.setQueueLimit("p", { concurrency: 4 });
      assert.equal(set.inUse.concurrency, 3, "the attempts open before the limit count");
      const inProc = await client.engine.registerCallback({
        id: before[0].id,
        lease: before[0].lease,
        timeoutMs: 60_000,
        kind: "in_process",
      });
      const http = await client.engine.registerCallback({
        id: before[1].id,
        lease: before[1].lease,
        timeoutMs: 60_000,
        kind: "http",
      });
      assert.ok(inProc && http);
      assert.equal(
        await client.engine.park({ id: before[0].id, lease: before[0].lease, callbackId: inProc }),
        true,
      );
      assert.equal(
        await client.engine.park({ id: before[1].id, lease: before[1].lease, callbackId: http }),
        true,
      );
      const waiters = await client.sql.unsafe(`select job_id, waiter from ${qs}.parked order by job_id`);
      assert.deepEqual(waiters.map((w) => w.waiter), ["in_process", "http"], "the park records what waits");
      assert.equal(
        (await client.listQueueLimits())[0].inUse.concurrency,
        2,
        "the in-process waiter holds its unit, the HTTP park does not",
      );
      const a = await claim(client, "p", 5, "t");
      assert.equal(a.length, 2, "4 minus the running attempt and the in-process waiter");
      assert.equal(a.throttle?.limit, "concurrency");
      assert.equal(a.throttle?.inUse, 4);
      // With countParked, the HTTP park holds a unit too: nothing more until two end.
      await client.setQueueLimit("p", { concurrency: 4, countParked: true });
      assert.equal((await client.listQueueLimits())[0].inUse.concurrency, 5);
      assert.equal((await claim(client, "p", 5, "t")).length, 0);
      // Every end of an attempt frees its unit: completion, failure, give-back, cancel.
      await client.engine.complete([{ id: before[2].id, lease: before[2].lease, result: null }], {
        keepCompleted: true,
      });
      await client.engine.fail({ id: a[0].id, lease: a[0].lease, error: "boom", terminal: true });
      assert.deepEqual(await client.engine.giveBack([{ id: a[1].id, lease: a[1].lease }]), [a[1].id]);
      await client.setQueueLimit("p", { concurrency: 4 }); // HTTP parks hold no unit again
      assert.equal((await client.listQueueLimits())[0].inUse.concurrency, 1, "only the in-process waiter");
      const b = await claim(client, "p", 5, "t");
      assert.equal(b.length, 3);
      await client.cancel(b[0].id);
      assert.equal((await claim(client, "p", 5, "t")).length, 1, "the cancelled attempt's unit is free");
      // Each claim that took jobs wrote a log row; the leader's duty keeps the newest of the queue.
      const [rows] = await client.sql.unsafe(
        `select count(*)::int as n from ${qs}.limit_open where queue = 'p'`,
      );
      assert.ok(rows.n >= 4, `log rows: ${rows.n}`);
      await client.sql.unsafe(`select "${client.schema}".prune_limit_log()`);
      const kept = await client.sql.unsafe(
        `select cardinality(job_ids)::int as n from ${qs}.limit_open where queue = 'p'`,
      );
      assert.equal(kept.length, 1);
      assert.equal((await client.listQueueLimits())[0].inUse.concurrency, 4, "the newest row still counts");
      // Clearing the limit drops its log.
      await client.setQueueLimit("p", {});
      const [gone] = await client.sql.unsafe(`select count(*)::int as n from ${qs}.limit_open`);
      assert.equal(gone.n, 0);
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name: "limits (queue storage): a rescue returns a dead holder's units",
  fn: () =>
    withSchema(async (client) => {
      await client.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ kind: "k", args: { i }, queue: "r" })));
      await client.setQueueLimit("r", { concurrency: 2 });
      assert.equal((await claim(client, "r", 4, "gone:1")).length, 2);
      assert.equal((await claim(client, "r", 4, "other:1")).length, 0);
      await ageClaims(client, "gone:1"); // claimed longer ago than rescueAfter
      const rescued = await client.engine.rescue(60_000); // gone:1 has no runtime row: presumed dead
      assert.equal(rescued.length, 2);
      assert.equal((await claim(client, "r", 4, "other:1")).length, 2, "the units came back");
    }),
});

Deno.test("limits: a limited claim registers the HTTP callbacks of the kinds that ask for one", () =>
  withSchema(async (client) => {
    const [a] = await client.enqueueMany([{ kind: "fn", queue: "h" }, { kind: "k", queue: "h" }]);
    await client.setQueueLimit("h", { rate: 10, per: 60_000 });
    await rateInForce(client, "h");
    const got = await claim(client, "h", 2, "t", {}, { fn: 60_000 });
    assert.equal(got.length, 2);
    const fn = got.find((j) => j.id === a.id)!;
    assert.ok(fn.callbackId, "the HTTP kind's attempt has a callback");
    assert.equal(got.find((j) => j.id !== a.id)!.callbackId, null);
    const cb = await client.getCallback(fn.callbackId!);
    assert.equal(cb?.state, "pending");
    assert.equal(cb?.jobId, a.id);
  }));

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a per-key limit takes jobs of keys with room, moves the others aside, and takes them back once their key has room",
  fn: () =>
    withSchema(async (client) => {
      const keys = ["a", "a", "a", "b", "b", null, "c"];
      const jobs = await client.enqueueMany(
        keys.map((k, i) => ({ kind: "k", args: { i }, queue: "t", ...(k ? { limitKey: k } : {}) })),
      );
      const set = await client.setQueueLimit("t", { perKey: { concurrency: 1 } });
      assert.equal(set.perKey, 1);
      assert.deepEqual(set.inUse.perKey, {});
      const first = await claim(client, "t", 10, "t");
      assert.deepEqual(
        first.map((j) => j.args.i),
        [0, 3, 5, 6],
        "one of each key, and the job without a key",
      );
      assert.equal(first.throttle?.limit, "per_key");
      const aside = await Promise.all([1, 2, 4].map((i) => client.getJob(jobs[i].id)));
      assert.deepEqual(aside.map((j) => j?.state), ["scheduled", "scheduled", "scheduled"], "moved aside");
      assert.deepEqual((await client.listQueueLimits())[0].inUse.perKey, { a: 1, b: 1, c: 1 });
      // Nothing more while every key holds its unit; a promotion brings the moved jobs back to the lane.
      assert.ok((await client.engine.promote()) >= 3);
      const none = await claim(client, "t", 10, "t");
      assert.equal(none.length, 0);
      assert.equal(none.throttle?.limit, "per_key");
      // a's attempt ends: a's next job runs; b's stays aside, and can be cancelled there.
      const a0 = first.find((j) => j.args.i === 0)!;
      await client.engine.complete([{ id: a0.id, lease: a0.lease, result: null }], { keepCompleted: true });
      // (no promotion: the claim puts back the moved jobs whose key has room itself, at most the key's room)
      const next = await claim(client, "t", 10, "t");
      assert.deepEqual(next.map((j) => j.args.i), [1]);
      assert.equal((await client.getJob(jobs[2].id))?.state, "scheduled", "a's room was one job");
      assert.equal((await client.cancel(jobs[4].id)).state, "cancelled");
      // Keys apply across claims of other processes too, and with a concurrency limit beside them.
      await client.setQueueLimit("t", { perKey: { concurrency: 2 }, concurrency: 5 });
      await client.engine.promote();
      const more = await claim(client, "t", 10, "other");
      assert.deepEqual(more.map((j) => j.args.i), [2], "a's second unit");
      assert.equal((await client.listQueueLimits())[0].inUse.concurrency, 5);
      const [log] = await client.sql.unsafe(
        `select count(*)::int as n from "${client.schema}_qs".limit_open where queue = 't'`,
      );
      assert.ok(log.n >= 3, "each claim that took jobs wrote its log row");
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a job moved aside is taken by the first claim its key has room for, ahead of the lane's backlog, and its attempt is an attempt like any other",
  fn: () =>
    withSchema(async (client, schema, sql) => {
      const qs = `"${schema}_qs"`;
      await client.setQueueLimit("t", { perKey: { concurrency: 1 } });
      const jobs = await client.enqueueMany([
        { kind: "k", args: { i: 0 }, queue: "t", limitKey: "a" },
        { kind: "k", args: { i: 1 }, queue: "t", limitKey: "a" },
        { kind: "k", args: { i: 2 }, queue: "t", limitKey: "a" },
        ...Array.from(
          { length: 20 },
          (_, i) => ({ kind: "k", args: { i: i + 3 }, queue: "t", limitKey: `b${i}` }),
        ),
      ]);
      const byI = (c: { args: unknown }[]) => c.map((j) => (j.args as { i: number }).i).sort((x, y) => x - y);
      const first = await claim(client, "t", 2, "rt");
      assert.deepEqual(byI(first), [0, 3], "a's first job and the next key's; a's others moved aside");
      assert.deepEqual(
        (await Promise.all([1, 2].map((i) => client.getJob(jobs[i].id)))).map((j) => j?.state),
        ["scheduled", "scheduled"],
      );
      const a0 = first.find((j) => j.args.i === 0)!;
      await client.engine.complete([{ id: a0.id, lease: a0.lease, result: null }], { keepCompleted: true });
      // a has room for one: the next claim takes a's oldest moved job first, though 19 jobs of other keys
      // were queued before it went back, and no more of a's.
      const next = await claim(client, "t", 2, "rt");
      assert.deepEqual(byI(next), [1, 4]);
      const a1 = next.find((j) => j.args.i === 1)!;
      assert.equal(a1.attempt, 1, "moving aside does not count an attempt");
      const seen = await client.getJob(a1.id);
      assert.equal(seen?.state, "running");
      assert.equal(seen?.lease, a1.lease);
      assert.equal((await client.getJob(jobs[2].id))?.state, "scheduled");
      assert.deepEqual((await client.listQueueLimits())[0].inUse.perKey, { a: 1, b0: 1, b1: 1 });
      const [q] = (await client.listQueues()).filter((x) => x.name === "t");
      assert.equal(q.counts.available, 18, "b2 .. b19");
      assert.equal(q.counts.running, 3);
      // A rotation and a prune of the slot the attempt was written in leave it open; it completes after.
      const [{ s: oldSlot }] = await sql.unsafe(`select ${qs}.current_slot() as s`);
      const [{ s: newSlot }] = await sql.unsafe(`select ${qs}.rotate(0) as s`);
      assert.notEqual(newSlot, null, "rotated");
      await sql.unsafe(`select ${qs}.sync_position()`);
      await sql.unsafe(`select ${qs}.prune($1, 0, false, 0)`, [oldSlot]);
      assert.equal((await client.getJob(a1.id))?.state, "running", "the prune left the open attempt");
      // A stale lease is refused; the attempt's own outcome ends it, and a's last job comes next.
      assert.deepEqual(
        await client.engine.complete([{ id: a1.id, lease: a1.lease - 1, result: null }], {
          keepCompleted: true,
        }),
        [],
      );
      assert.deepEqual(
        await client.engine.complete([{ id: a1.id, lease: a1.lease, result: "one" }], {
          keepCompleted: true,
        }),
        [a1.id],
      );
      const done = await client.getJob(a1.id);
      assert.equal(done?.state, "completed");
      assert.equal(done?.result, "one");
      const last = await claim(client, "t", 1, "rt");
      assert.deepEqual(byI(last), [2]);
      // Nothing is lost or taken twice: drained, every job completes once.
      const seenIds = new Set([...first, ...next, ...last].map((j) => j.id));
      const open = [...first, ...next, ...last].filter((j) => j.id !== a0.id && j.id !== a1.id);
      await client.engine.complete(open.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
        keepCompleted: true,
      });
      for (;;) {
        const got = await claim(client, "t", 5, "rt");
        if (got.length === 0) break;
        for (const j of got) {
          assert.ok(!seenIds.has(j.id), `job ${j.id} taken twice`);
          seenIds.add(j.id);
        }
        await client.engine.complete(got.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
          keepCompleted: true,
        });
      }
      assert.equal(seenIds.size, jobs.length);
      const states = await Promise.all(jobs.map((j) => client.getJob(j.id)));
      assert.ok(states.every((j) => j?.state === "completed" && j.attempt === 1), "each ran once");
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): jobs a claim takes back from aside can be held and given back, failed and retried, and resolved by callback",
  fn: () =>
    withSchema(async (client) => {
      await client.setQueueLimit("t", { perKey: { concurrency: 1 } });
      const jobs = await client.enqueueMany(
        ["a", "b", "c"].flatMap((k) =>
          [0, 1].map((i) => ({ kind: k === "c" ? "fn" : "k", args: { k, i }, queue: "t", limitKey: k }))
        ),
      );
      const [a1, b1, c1] = [jobs[1], jobs[3], jobs[5]];
      const first = await claim(client, "t", 6, "rt", {}, { fn: 60_000 });
      assert.deepEqual(first.map((j) => j.args.i), [0, 0, 0], "one job of each key; the others moved aside");
      await client.engine.complete(first.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
        keepCompleted: true,
      });
      // One free slot, three asked: the moved jobs come back, the first into the slot, two held.
      const next = await client.engine.claim({
        queue: "t",
        limit: 3,
        free: 1,
        runtimeId: "rt",
        policies: {},
        callbackTimeoutsMs: { fn: 60_000 },
        prefetchTtlMs: 60_000,
      });
      assert.deepEqual(next.map((j) => j.id).sort((x, y) => x - y), [a1.id, b1.id, c1.id]);
      assert.equal(next.filter((j) => j.prefetched).length, 2);
      const got = (id: number) => next.find((j) => j.id === id)!;
      // The HTTP kind's attempt has its callback.
      const cb = got(c1.id).callbackId;
      assert.ok(cb, "a callback registered for the HTTP kind");
      assert.equal((await client.getCallback(cb!))?.state, "pending");
      // A held job given back: available again, its attempt refunded.
      const b = got(b1.id);
      assert.deepEqual(
        [got(a1.id).prefetched === true, b.prefetched === true, got(c1.id).prefetched === true],
        [false, true, true],
        "oldest first",
      );
      assert.deepEqual(await client.engine.giveBack([{ id: b.id, lease: b.lease }]), [b.id]);
      const back = await client.getJob(b.id);
      assert.deepEqual([back?.state, back?.attempt], ["available", 0]);
      // A failure with a retry: retryable, then claimed again once promoted.
      const a = got(a1.id);
      await client.engine.fail({ id: a.id, lease: a.lease, error: "e", terminal: false, retryDelayMs: 0 });
      assert.equal((await client.getJob(a.id))?.state, "retryable");
      // The callback completes its attempt.
      assert.equal((await client.completeExternal(cb!, { ok: true })).state, "completed");
      assert.equal((await client.getJob(c1.id))?.state, "completed");
      await client.engine.promote();
      const rest = await claim(client, "t", 5, "rt");
      const ids = rest.map((j) => j.id);
      assert.ok(ids.includes(a1.id), "the failed job comes back for its second attempt");
      assert.equal(rest.find((j) => j.id === a1.id)!.attempt, 2);
      assert.ok(ids.includes(b1.id), "the given-back job is claimed again");
      await client.engine.complete(rest.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
        keepCompleted: true,
      });
      const states = await Promise.all(jobs.map((j) => client.getJob(j.id)));
      assert.ok(states.every((j) => j?.state === "completed"), JSON.stringify(states.map((j) => j?.state)));
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a dead worker's attempt taken back from aside is rescued, its key's unit returns, and the job runs again",
  fn: () =>
    withSchema(async (client) => {
      await client.setQueueLimit("t", { perKey: { concurrency: 1 } });
      const [a0, a1, b0] = await client.enqueueMany([
        { kind: "k", args: { i: 0 }, queue: "t", limitKey: "a" },
        { kind: "k", args: { i: 1 }, queue: "t", limitKey: "a" },
        { kind: "k", args: { i: 2 }, queue: "t", limitKey: "b" },
      ]);
      await liveRuntime(client, "rt-gone");
      const first = await claim(client, "t", 3, "rt-gone");
      assert.deepEqual(first.map((j) => j.id).sort((x, y) => x - y), [a0.id, b0.id], "a1 moved aside");
      const x0 = first.find((j) => j.id === a0.id)!;
      await client.engine.complete([{ id: x0.id, lease: x0.lease, result: null }], { keepCompleted: true });
      const back = await claim(client, "t", 3, "rt-gone");
      assert.deepEqual(back.map((j) => j.id), [a1.id], "taken back through the claim lane");
      // The worker stops (its heartbeat and claims are old): the leader's rescue ends both open attempts.
      await staleRuntime(client, "rt-gone");
      const rescued = (await client.engine.rescue(60_000)).map((j) => j.id).sort((x, y) => x - y);
      assert.deepEqual(rescued, [a1.id, b0.id]);
      const after = await client.getJob(a1.id);
      assert.equal(after?.state, "retryable");
      assert.equal(after?.attempt, 1);
      assert.match(JSON.stringify(after?.errors), /rescued/);
      assert.deepEqual((await client.listQueueLimits())[0].inUse.perKey, {}, "the units came back");
      await client.sql.unsafe(
        `update "${client.schema}_qs".deferred set run_at = now() where job_id = any($1)`,
        [[a1.id, b0.id]],
      );
      await client.engine.promote();
      await liveRuntime(client, "rt-2");
      const again = await claim(client, "t", 3, "rt-2");
      assert.deepEqual(again.map((j) => j.id).sort((x, y) => x - y), [a1.id, b0.id]);
      assert.equal(again.find((j) => j.id === a1.id)!.attempt, 2);
      await client.engine.complete(again.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
        keepCompleted: true,
      });
      assert.equal((await client.getJob(a1.id))?.state, "completed");
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "canonical",
  name: "limits (canonical): a per-key limit is refused, pointing at queue storage",
  fn: () =>
    withSchema(async (client) => {
      await assert.rejects(
        client.setQueueLimit("t", { perKey: { concurrency: 1 } }),
        (e) => e instanceof ValidationError && /per-key limits need queue storage/.test(e.message),
      );
      assert.deepEqual(await client.listQueueLimits(), []);
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): under a per-key limit, one key's backlog enqueued first does not hold the other keys back",
  fn: () =>
    withSchema(async (client) => {
      await client.setQueueLimit("h", { perKey: { concurrency: 1 } });
      await client.enqueueMany([
        ...Array.from({ length: 40 }, (_, i) => ({ kind: "k", args: { i }, queue: "h", limitKey: "hot" })),
        ...Array.from(
          { length: 40 },
          (_, i) => ({ kind: "k", args: { i }, queue: "h", limitKey: `k${i % 8}` }),
        ),
      ]);
      const running = new Map<string, number>();
      const ends = new Map<string, number[]>();
      let most = 0;
      const { stop } = await startWorker(client, {
        queues: { h: { maxWorkers: 10 } },
        handlers: {
          k: async (job) => {
            const key = job.limitKey!;
            running.set(key, (running.get(key) ?? 0) + 1);
            most = Math.max(most, running.get(key)!);
            await new Promise((r) => setTimeout(r, 20));
            running.set(key, running.get(key)! - 1);
            ends.set(key, [...(ends.get(key) ?? []), Date.now()]);
          },
        },
      });
      try {
        await waitFor(() => [...ends.values()].flat().length === 80, 30_000, "80 ran");
        assert.equal(most, 1, "never two jobs of one key at once in this process");
        const hotLast = Math.max(...ends.get("hot")!);
        const othersLast = Math.max(...[...ends].filter(([k]) => k !== "hot").flatMap(([, t]) => t));
        assert.ok(
          othersLast < hotLast,
          `the other keys finished before the hot key's backlog (${hotLast - othersLast} ms earlier)`,
        );
      } finally {
        await stop();
      }
    }),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a claim told of attempts whose handler returned does not count them, with their lease only",
  fn: () =>
    withSchema(async (client) => {
      await client.enqueueMany([
        ...Array.from({ length: 6 }, (_, i) => ({ kind: "k", args: { i }, queue: "e" })),
        ...Array.from({ length: 4 }, (_, i) => ({ kind: "k", args: { i }, queue: "f", limitKey: "x" })),
      ]);
      await client.setQueueLimit("e", { concurrency: 2 });
      const req = (queue: string, ended: { id: number; lease: number }[] = []) =>
        client.engine.claim({
          queue,
          limit: 5,
          free: 5,
          runtimeId: "t",
          policies: {},
          callbackTimeoutsMs: {},
          prefetchTtlMs: 0,
          ended,
        });
      const first = await req("e");
      assert.equal(first.length, 2);
      assert.equal(first.countsUnits, true, "the claim says the queue counts units");
      // A stale lease (or an attempt of another queue) ends nothing: still both units held.
      const stale = await req("e", [{ id: first[0].id, lease: first[0].lease - 1 }, {
        id: 999_999,
        lease: 1,
      }]);
      assert.equal(stale.length, 0);
      assert.equal(stale.throttle?.limit, "concurrency");
      // The first attempt's handler returned (its outcome not written yet): its unit is free.
      const next = await req("e", [{ id: first[0].id, lease: first[0].lease }]);
      assert.equal(next.length, 1);
      assert.equal(next.throttle?.inUse, 2);
      // That claim's log row no longer holds it: a claim that is not told of it does not count it either.
      assert.equal((await client.listQueueLimits()).find((l) => l.queue === "e")?.inUse.concurrency, 2);
      assert.equal((await req("e")).length, 0);
      // Its outcome, written later, changes nothing; the other two end and free two units.
      await client.engine.complete(
        [first[0], first[1], next[0]].map((j) => ({ id: j.id, lease: j.lease, result: null })),
        {
          keepCompleted: true,
        },
      );
      assert.equal((await req("e")).length, 2);

      // Per key: a returned handler frees its key's unit the same way.
      await client.setQueueLimit("f", { perKey: { concurrency: 1 } });
      const f1 = await req("f");
      assert.equal(f1.length, 1);
      assert.equal(f1.throttle?.limit, "per_key");
      await client.engine.promote();
      const f2 = await req("f", [{ id: f1[0].id, lease: f1[0].lease }]);
      assert.equal(f2.length, 1, "x's unit is free once its handler returned");
      assert.notEqual(f2[0].id, f1[0].id);
      // A queue without a unit limit does not ask for them.
      await client.enqueueMany([{ kind: "k", queue: "plain" }]);
      const plain = await req("plain");
      assert.equal(plain.length, 1);
      assert.equal(plain.countsUnits, undefined);
    }),
});

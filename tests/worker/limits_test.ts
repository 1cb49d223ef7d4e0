/**
 * Fleet-wide rate limits (ADR 019): the limits row and its setter, the claim's budget and throttled answer on
 * the engine under test, and three worker processes sharing one rate, also with one killed by kill -9.
 */
import assert from "node:assert/strict";
import {
  allJobsSql,
  canonicalDb,
  liveRuntimeBoth,
  TEST_ENGINE,
  testClient,
  waitFor,
  withSchema,
} from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";
import { spawnWorker } from "../helpers/process.ts";
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
      [{ concurrency: 2 }, /not available yet/],
      [{ perKey: { concurrency: 1 } }, /not available yet/],
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
    const set = await client.setQueueLimit("c", { rate: 3, per: 400 });
    const a = await claim(client, "c", 4, "t");
    assert.equal(a.length, 4, "counting, not enforced yet");
    assert.equal(a.throttle, undefined);
    await waitFor(() => Date.now() > set.rateInForceAt!.getTime() + 20, 5_000, "the rate in force");
    // The window of 400 ms now lies after the rate was set: the 4 claimed above count while they are in it.
    const [w] = await client.sql.unsafe(
      `select coalesce(sum(n), 0)::int as n from "${client.schema}".limit_log where at > now() - interval '400 ms'`,
    );
    const b = await claim(client, "c", 5, "t");
    assert.equal(b.length, Math.max(0, 3 - w.n), "the counted claims are in the window");
    assert.equal(b.throttle?.limit, b.length < 5 ? "rate" : undefined);
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

/** Claims of `queue` as (time ms, jobs): queue storage's claims rows, and every engine's limit log. */
async function claimEvents(client: Client, queue: string): Promise<{ at: number; n: number }[][]> {
  const s = client.schema;
  const log = await client.sql.unsafe(
    `select extract(epoch from at) * 1000 as at, n from "${s}".limit_log where queue = $1 order by at`,
    [queue],
  );
  const own = TEST_ENGINE === "queue_storage"
    ? await client.sql.unsafe(
      `select extract(epoch from at) * 1000 as at, n from "${s}_qs".claims where queue = $1 order by at`,
      [queue],
    )
    // canonical keeps no claim records: the last claim of each job (a subset of the claims)
    : await client.sql.unsafe(
      `select extract(epoch from claimed_at) * 1000 as at, 1 as n from ${allJobsSql(s)} j
        where queue = $1 and claimed_at is not null order by claimed_at`,
      [queue],
    );
  const rows = (rs: { at: string | number; n: number }[]) =>
    rs.map((r) => ({ at: Number(r.at), n: Number(r.n) }));
  return [rows(log as never), rows(own as never)];
}

/** The most jobs claimed in any window of `perMs` (windows start at a claim). */
function busiestWindow(events: { at: number; n: number }[], perMs: number): number {
  let most = 0;
  for (let i = 0; i < events.length; i++) {
    let sum = 0;
    for (let j = i; j < events.length && events[j].at < events[i].at + perMs; j++) sum += events[j].n;
    most = Math.max(most, sum);
  }
  return most;
}

async function threeProcesses(killOne: boolean): Promise<void> {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  await client.setQueueLimit("default", { rate: 20, per: 1000 });
  await rateInForce(client, "default");
  await client.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ kind: "effect", args: { i } })));
  const procs = [1, 2, 3].map(() =>
    spawnWorker(schema, { PREFETCH: "10", MAX_WORKERS: "10", RESCUE_MS: "1000" })
  );
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    const started = Date.now();
    if (killOne) {
      await new Promise((r) => setTimeout(r, 1_000));
      await procs[0].kill("SIGKILL");
    }
    await new Promise((r) => setTimeout(r, Math.max(0, 5_000 - (Date.now() - started))));
    const [log, own] = await claimEvents(client, "default");
    const claimed = log.reduce((a, e) => a + e.n, 0);
    assert.ok(claimed >= 80, `at least 80 claimed in 5 s at 20/s (got ${claimed})`);
    assert.ok(
      busiestWindow(log, 1000) <= 20,
      `the log: at most 20 in any second (got ${busiestWindow(log, 1000)})`,
    );
    assert.ok(
      busiestWindow(own, 1000) <= 20,
      `the claims: at most 20 in any second (got ${busiestWindow(own, 1000)})`,
    );
    if (TEST_ENGINE === "queue_storage") {
      assert.equal(own.reduce((a, e) => a + e.n, 0), claimed, "every claim of the queue wrote its log row");
    }
    // Nothing lost: without the limit every job completes, the killed process's ones after their rescue.
    await client.resetQueueLimit("default");
    await waitFor(
      async () => {
        const [r] = await client.sql.unsafe(
          `select count(*)::int as n from ${allJobsSql(schema)} j where state = 'completed'`,
        );
        return r.n === 300;
      },
      60_000,
      "all 300 completed",
    );
    const [e] = await client.sql.unsafe(`select count(distinct job_id)::int as n from "${schema}".effects`);
    assert.equal(e.n, 300);
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
}

Deno.test("limits: three processes share a rate of 20/s: no second holds more than 20 claims", () =>
  threeProcesses(false));

Deno.test("limits: a rate of 20/s holds while one of three processes is killed with kill -9; nothing is lost", () =>
  threeProcesses(true));

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
      // 12 jobs at 4 per 500 ms: three windows, so the last start is at least a full window after the first.
      starts.sort((a, b) => a - b);
      assert.ok(
        starts[11] - starts[0] >= 1_000 - 50,
        `spread over the windows (${starts[11] - starts[0]} ms)`,
      );
      for (let i = 0; i + 4 < starts.length; i++) {
        assert.ok(starts[i + 4] - starts[i] >= 500 - 50, `no five starts within one window (at ${i})`);
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

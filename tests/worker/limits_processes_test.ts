/**
 * Fleet-wide limits with three worker processes (ADR 019): no window of a second holds more claims than
 * the rate, held jobs included; never more attempts at once than a concurrency limit, or of one key than a
 * per-key limit; each also while one process is killed with kill -9 (concurrency: or stopped with SIGSTOP);
 * nothing is lost.
 */
import assert from "node:assert/strict";
import { allJobsSql, TEST_ENGINE, testClient, waitFor } from "../helpers/db.ts";
import { spawnWorker } from "../helpers/process.ts";
import type { Client } from "../../src/client/client.ts";

/** Puts a queue's rate in force now, as if it had been counting claims for an hour (none were made). */
async function rateInForce(client: Client, queue: string): Promise<void> {
  await client.sql.unsafe(
    `update "${client.schema}".queue_limits set rate_logged_since = now() - interval '1 hour' where queue = $1`,
    [queue],
  );
}

/**
 * Claims of `queue` as (time ms, jobs): every engine's limit log, and queue storage's claims rows (canonical
 * keeps no claim records: the last claim of each job, a subset of the claims). One statement, so both are
 * read in one snapshot while the workers go on claiming.
 */
async function claimEvents(client: Client, queue: string): Promise<{ at: number; n: number }[][]> {
  const s = client.schema;
  const own = TEST_ENGINE === "queue_storage"
    ? `select 'own' as src, extract(epoch from at) * 1000 as at, n from "${s}_qs".claims where queue = $1`
    : `select 'own', extract(epoch from claimed_at) * 1000, 1 from ${allJobsSql(s)} j
        where queue = $1 and claimed_at is not null`;
  const all = await client.sql.unsafe(
    `select * from (select 'log' as src, extract(epoch from at) * 1000 as at, n from "${s}".limit_log
                     where queue = $1
                    union all ${own}) x order by at`,
    [queue],
  );
  const rows = (src: string) =>
    all.filter((r) => r.src === src).map((r) => ({ at: Number(r.at), n: Number(r.n) }));
  return [rows("log"), rows("own")];
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

/** The most intervals [start, end) that overlap at one instant. */
function mostAtOnce(intervals: { start: number; end: number }[]): number {
  const events = intervals.flatMap((i) => [[i.start, 1], [i.end, -1]] as [number, number][]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at the same instant
  let now = 0, most = 0;
  for (const [, d] of events) most = Math.max(most, now += d);
  return most;
}

/** A worker process of these tests: 10 slots (the first process under a fault: 1) and prefetch 3. */
function spawnLimited(schema: string, first: boolean) {
  // The first process under a fault has one slot and handlers of 3 s, so that it holds units (one attempt
  // running, one held) when the fault hits it.
  return spawnWorker(schema, {
    PREFETCH: "3",
    MAX_WORKERS: first ? "1" : "10",
    RESCUE_MS: "1000",
    SLOW_MS: first ? "3000" : "50",
    SLOW_LEASE: "1",
    LEADER_TTL_MS: "1500",
  });
}

/** A schema with an effects table (each run of a `slow` job: its job, lease, process and start). */
async function effectsClient() {
  const t = await testClient();
  await t.client.sql.unsafe(
    `create table "${t.schema}".effects (job_id bigint not null, pid int not null, lease int,
                                         at timestamptz default clock_timestamp(), ended_at timestamptz)`,
  );
  return t;
}

/** Waits until process `pid` has started a job. */
async function startedOne(client: Client, schema: string, pid: number): Promise<void> {
  await waitFor(
    async () =>
      (await client.sql.unsafe(`select count(*)::int as n from "${schema}".effects where pid = $1`, [pid]))[0]
        .n >=
        1,
    20_000,
    "the first process started a job",
  );
}

/**
 * Waits until all `n` jobs completed and returns each completed attempt's key and interval. Each handler
 * wrote its effect row while it ran (after its claim committed), and its completion started after the
 * handler returned: [effect, finalized_at] lies inside the span a limit counts, from the claim's commit to
 * the completion's commit. (The claim's own time is its transaction's start, before it waited for the
 * queue's claim lock.)
 */
async function completedIntervals(
  client: Client,
  schema: string,
  n: number,
): Promise<{ key: string; start: number; end: number }[]> {
  await waitFor(
    async () => {
      const [r] = await client.sql.unsafe(
        `select count(*)::int as n from ${allJobsSql(schema)} j where state = 'completed'`,
      );
      return r.n === n;
    },
    300_000,
    `all ${n} completed`,
  );
  const rows = await client.sql.unsafe(
    `select j.limit_key as k, extract(epoch from e.at) * 1000 as s, extract(epoch from e.ended_at) * 1000 as e
       from ${allJobsSql(schema)} j join "${schema}".effects e on e.job_id = j.id and e.lease = j.lease
      where j.state = 'completed' and e.ended_at is not null`,
  );
  // A unit is held from the claim until the handler returns (ADR 019): the handler records its start and,
  // just before it returns, its end.
  assert.equal(rows.length, n, "every completed attempt recorded its start and end");
  return rows.map((r) => ({ key: r.k, start: Number(r.s), end: Number(r.e) }));
}

/** Asserts that an attempt of the faulty process was rescued (its units came back) and run again elsewhere. */
async function rescuedAndRunAgain(client: Client, schema: string): Promise<void> {
  const [r] = await client.sql.unsafe(
    `select count(*)::int as n from ${allJobsSql(schema)} j where state = 'completed' and attempt > 1`,
  );
  assert.ok(r.n >= 1, "at least one attempt of the faulty process was rescued and run again");
}

/**
 * Once the first process (the only one running) has started a job, starts two more and kills the first with
 * kill -9, or stops it with SIGSTOP past rescueAfter and resumes it; for a stop, its pid and when it resumed.
 */
async function injectFault(
  client: Client,
  schema: string,
  procs: ReturnType<typeof spawnLimited>[],
  fault: "kill" | "stop",
): Promise<{ pid: number; resumedAt: number } | null> {
  const victim = procs[0].child.pid;
  await startedOne(client, schema, victim);
  procs.push(spawnLimited(schema, false), spawnLimited(schema, false));
  if (fault === "kill") {
    await procs[0].kill("SIGKILL");
    return null;
  }
  procs[0].child.kill("SIGSTOP");
  // Stopped until an attempt it began was rescued (past rescueAfter, and past its term if it led) and run
  // again by another process: a wait on what happened, not a guess of how long it takes.
  await waitFor(
    async () =>
      (await client.sql.unsafe(
        `select count(*)::int as n from "${schema}".effects e
          where e.pid = $1 and exists (select 1 from "${schema}".effects o where o.job_id = e.job_id and o.lease > e.lease)`,
        [victim],
      ))[0].n >= 1,
    120_000,
    "an attempt of the stopped process rescued and run again",
  );
  procs[0].child.kill("SIGCONT");
  return { pid: victim, resumedAt: Date.now() };
}

/**
 * Resumed, the stopped process started none of the jobs it held before the stop: every run it began after
 * resuming is of an attempt it claimed after resuming.
 */
async function noStaleHeldStart(
  client: Client,
  schema: string,
  stopped: { pid: number; resumedAt: number },
): Promise<void> {
  const late = await client.sql.unsafe(
    `select e.job_id, e.lease from "${schema}".effects e
      where e.pid = $1 and e.at > to_timestamp($2 / 1000.0)
        and exists (select 1 from "${schema}".effects o where o.job_id = e.job_id and o.lease > e.lease)`,
    [stopped.pid, stopped.resumedAt],
  );
  assert.equal(late.length, 0, `no stale held job started after the resume: ${JSON.stringify([...late])}`);
}

/**
 * Three worker processes under a concurrency limit of 2 over 200 jobs of 50 ms; `fault`: one process is
 * killed with kill -9 once it runs a job, or stopped with SIGSTOP past rescueAfter and then resumed.
 */
async function concurrencyTwo(fault: "none" | "kill" | "stop"): Promise<void> {
  const { client, drop, schema } = await effectsClient();
  await client.setQueueLimit("default", { concurrency: 2 });
  await client.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ kind: "slow", args: { i } })));
  const procs = fault === "none"
    ? [1, 2, 3].map(() => spawnLimited(schema, false))
    : [spawnLimited(schema, true)];
  let stopped: { pid: number; resumedAt: number } | null = null;
  try {
    await procs[0].waitLine(/^started /);
    if (fault !== "none") stopped = await injectFault(client, schema, procs, fault);
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    const most = mostAtOnce(await completedIntervals(client, schema, 200));
    assert.ok(most <= 2, `at most 2 at once (got ${most})`);
    assert.equal(most, 2, "the limit's two units were used");
    if (fault !== "none") await rescuedAndRunAgain(client, schema);
    if (stopped) await noStaleHeldStart(client, schema, stopped);
    // (Which process runs them is not promised: the process whose attempt ends takes its unit back first.)
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
}

Deno.test("limits: three processes under a concurrency limit of 2: never more than 2 at once", () =>
  concurrencyTwo("none"));

Deno.test(
  "limits: a concurrency limit of 2 holds while one of three processes is killed with kill -9; nothing is lost",
  () => concurrencyTwo("kill"),
);

Deno.test(
  "limits: a concurrency limit of 2 holds while one of three processes is stopped past rescueAfter and resumed",
  () => concurrencyTwo("stop"),
);

/**
 * Three worker processes under a per-key limit of 1 over 20 keys, 10 jobs of 50 ms per key; `fault`: one
 * process is killed with kill -9 once it runs a job, or stopped with SIGSTOP past rescueAfter and resumed.
 */
async function perKeyOne(fault: "none" | "kill" | "stop"): Promise<void> {
  const { client, drop, schema } = await effectsClient();
  await client.setQueueLimit("default", { perKey: { concurrency: 1 } });
  await client.enqueueMany(
    Array.from({ length: 200 }, (_, i) => ({ kind: "slow", args: { i }, limitKey: `k${i % 20}` })),
  );
  const procs = fault === "none"
    ? [1, 2, 3].map(() => spawnLimited(schema, false))
    : [spawnLimited(schema, true)];
  let stopped: { pid: number; resumedAt: number } | null = null;
  try {
    await procs[0].waitLine(/^started /);
    if (fault !== "none") stopped = await injectFault(client, schema, procs, fault);
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    const intervals = await completedIntervals(client, schema, 200);
    const byKey = new Map<string, { start: number; end: number }[]>();
    for (const i of intervals) byKey.set(i.key, [...(byKey.get(i.key) ?? []), i]);
    assert.equal(byKey.size, 20);
    for (const [k, of] of byKey) {
      const most = mostAtOnce(of);
      assert.ok(most <= 1, `key ${k}: at most 1 at once (got ${most})`);
    }
    // Keys run side by side: at the busiest instant, several keys ran at once.
    const all = mostAtOnce(intervals);
    assert.ok(all >= 5, `several keys at once (got ${all})`);
    if (fault !== "none") await rescuedAndRunAgain(client, schema);
    if (stopped) await noStaleHeldStart(client, schema, stopped);
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
}

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a per-key limit of 1 over 20 keys with three processes: one job per key at once",
  fn: () => perKeyOne("none"),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a per-key limit of 1 holds while one of three processes is killed with kill -9",
  fn: () => perKeyOne("kill"),
});

Deno.test({
  ignore: TEST_ENGINE !== "queue_storage",
  name:
    "limits (queue storage): a per-key limit of 1 holds while one of three processes is stopped past rescueAfter and resumed",
  fn: () => perKeyOne("stop"),
});

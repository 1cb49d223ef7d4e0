/**
 * The leader's term (docs/guide/operations.md, "The leader"): a leader that stops renewing is replaced
 * within leaderTtl plus an election interval, and a former leader's duties then write nothing (the
 * fence). In process with two elections, and with real worker processes: one stopped with SIGSTOP, one
 * whose event loop a handler blocks.
 */
import assert from "node:assert/strict";
import { silentLogger } from "../../mod.ts";
import { LeaderElection } from "../../src/worker/leader.ts";
import { NotLeaderError } from "../../src/db/driver.ts";
import type { Client } from "../../src/client/client.ts";
import postgres from "postgres";
import { DATABASE_URL, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { type Proc, spawnWorker } from "../helpers/process.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function election(
  client: Client,
  id: string,
  ttlMs: number,
  logger = silentLogger,
  now?: () => number,
): LeaderElection {
  return new LeaderElection(logger, () => {}, { db: client.db, names: client.names, id, ttlMs, now });
}

/** A clock the test moves (ms), for the elections' renewal schedules. */
function testClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

/**
 * `ms` pass for the term and for the elections: the term's age is the database's clock, so its
 * `renewed_at` moves back; the renewal schedules' test clock moves forward.
 */
async function elapse(client: Client, clock: { advance: (ms: number) => void }, ms: number): Promise<void> {
  await client.sql.unsafe(
    `update ${client.names.q}.leadership set renewed_at = renewed_at - $1::bigint * interval '1 millisecond'`,
    [ms],
  );
  clock.advance(ms);
}

async function term(client: Client): Promise<{ holder: string | null; term: number }> {
  const [r] = await client.sql.unsafe(`select holder, term from ${client.names.q}.leadership`);
  return { holder: r.holder, term: Number(r.term) };
}

Deno.test("leader term: renewed while the leader ticks; taken over once it stops; the former leader's writes are fenced", async () => {
  const { client, drop } = await testClient();
  // No step waits: the renewal schedules run on a test clock and the term's age is moved back in the
  // database (a TTL of 5 s, a renewal due every second).
  const clock = testClock();
  const a = election(client, "A", 5_000, silentLogger, clock.now);
  const b = election(client, "B", 5_000, silentLogger, clock.now);
  const renewedAt = async () =>
    ((await client.sql.unsafe(`select renewed_at from ${client.names.q}.leadership`))[0].renewed_at as Date)
      .getTime();
  try {
    assert.equal(await a.tick(), true);
    assert.equal(await b.tick(), false);
    assert.deepEqual(await term(client), { holder: "A", term: 1 });
    // A keeps renewing: over 12 s of the term's time, B never takes over, however often it tries.
    for (let i = 0; i < 12; i++) {
      await elapse(client, clock, 1_000);
      const before = await renewedAt();
      assert.equal(await a.tick(), true);
      assert.ok(await renewedAt() > before, `tick ${i}: A renewed its term`);
      assert.equal(await b.tick(), false, `tick ${i}`);
    }
    // A tick before its renewal is due renews nothing.
    const kept = await renewedAt();
    clock.advance(a.renewEveryMs - 1);
    assert.equal(await a.tick(), true);
    assert.equal(await renewedAt(), kept, "no renewal before renewEveryMs");
    // A stalls. B takes over once the term is older than the TTL, not before.
    await elapse(client, clock, 4_000);
    assert.equal(await b.tick(), false, "the term is not stale yet");
    await elapse(client, clock, 1_500);
    assert.equal(await b.tick(), true, "taken over");
    assert.deepEqual(await term(client), { holder: "B", term: 2 });
    // A duty of A's now writes nothing: the fence finds another term.
    await client.sql.unsafe(`insert into ${client.names.q}.queues (name, paused) values ('fence', false)`);
    await assert.rejects(
      a.fenced.query(`update ${client.names.q}.queues set paused = true where name = 'fence'`),
      NotLeaderError,
    );
    const [q] = await client.sql.unsafe(`select paused from ${client.names.q}.queues where name = 'fence'`);
    assert.equal(q.paused, false, "the stale leader's write did not land");
    assert.equal(await a.tick(), false, "A notices it no longer leads");
    assert.equal(await b.tick(), true);
    // B's duties do write.
    await b.fenced.query(`update ${client.names.q}.queues set paused = true where name = 'fence'`);
    const [q2] = await client.sql.unsafe(`select paused from ${client.names.q}.queues where name = 'fence'`);
    assert.equal(q2.paused, true);
    // A, no longer leading, cannot write under B's term either.
    await assert.rejects(a.fenced.query(`select 1`), NotLeaderError);
  } finally {
    await a.resign();
    await b.resign();
    await drop();
  }
});

Deno.test("leader term: a duty in flight keeps its term until it ends; a leader stopped inside a duty has its transaction ended and rolled back", async () => {
  const { client, drop } = await testClient();
  const warnings: string[] = [];
  const logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
  // The TTL is also the idle timeout of a duty's transaction: 5 s leaves B's check below room on a loaded
  // machine; the test then waits for PostgreSQL to end the idle duty (about 5 s), not for a guessed time.
  const a = election(client, "A", 5_000);
  const b = election(client, "B", 5_000, logger);
  const q = client.names.q;
  try {
    await client.sql.unsafe(`insert into ${q}.queues (name, paused) values ('fence', false)`);
    assert.equal(await a.tick(), true);
    // A's duty holds the term's row: while it runs, B cannot take the term.
    let release!: () => void;
    const held = new Promise<void>((r) => release = r);
    let begun!: (pid: number) => void;
    const dutyPid = new Promise<number>((r) => begun = r);
    const duty = a.fenced.begin(async (tx) => {
      await tx.query(`update ${q}.queues set paused = true where name = 'fence'`);
      begun(Number((await tx.query(`select pg_backend_pid() as pid`))[0].pid));
      await held;
      await tx.query(`select 1`);
    }).then(() => null, (e: Error) => e);
    const pid = await dutyPid;
    assert.equal(await b.tick(), false, "not stale yet");
    // The duty's transaction stays open, idle, past the TTL: PostgreSQL ends its session (A is "stopped" in
    // it). The test waits for that session to be gone, not for a guessed time.
    await waitFor(
      async () =>
        (await client.sql.unsafe(`select 1 from pg_stat_activity where pid = $1`, [pid])).length === 0,
      30_000,
      "PostgreSQL to end the idle duty's session",
    );
    release();
    assert.ok((await duty) instanceof Error, "the idle transaction was ended");
    const [row] = await client.sql.unsafe(`select paused from ${q}.queues where name = 'fence'`);
    assert.equal(row.paused, false, "the stopped leader's write was rolled back");
    // The term is older than the TTL and nothing holds it: B takes the next term and says whose it was.
    assert.equal(await b.tick(), true);
    assert.deepEqual(await term(client), { holder: "B", term: 2 });
    assert.match(
      warnings.join("\n"),
      /the leader A has not renewed its term 1 for \d+ s; took over with term 2/,
    );
    // A notices at its next renewal.
    assert.equal(await a.tick(), false);
    // A duty that ends in time commits, and B's renewals keep A out.
    await b.fenced.query(`update ${q}.queues set paused = true where name = 'fence'`);
    const [row2] = await client.sql.unsafe(`select paused from ${q}.queues where name = 'fence'`);
    assert.equal(row2.paused, true);
    // B resigns: A takes the term at its next election, without waiting for the TTL.
    await b.resign();
    assert.equal(b.isLeader, false);
    assert.equal(await a.tick(), true);
    assert.deepEqual(await term(client), { holder: "A", term: 3 });
  } finally {
    await a.resign();
    await b.resign();
    await drop();
  }
});

Deno.test("leader term: a challenger skips a term whose duty is in flight instead of waiting for it; the holder renews meanwhile", async () => {
  const { client, drop } = await testClient();
  const clock = testClock();
  const a = election(client, "A", 1_000, silentLogger, clock.now);
  const b = election(client, "B", 1_000, silentLogger, clock.now);
  const q = client.names.q;
  // The test's own transaction holds a lock that A's duty statement waits for: a statement in flight
  // (not idle, so the idle timeout does not end it) for as long as the test wants.
  const blocker = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  let unblock: (() => void) | undefined;
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => locked = r);
  const blocking = blocker.begin(async (tx) => {
    await tx.unsafe(`lock table ${q}.queues in access exclusive mode`);
    await new Promise<void>((r) => {
      unblock = r;
      locked();
    });
  });
  try {
    assert.equal(await a.tick(), true);
    // The term is past its TTL: only the duty's hold on the row keeps B out.
    await elapse(client, clock, 1_500);
    await isLocked;
    let started!: () => void;
    const inDuty = new Promise<void>((r) => started = r);
    let dutyDone = false;
    const duty = a.fenced.begin(async (tx) => {
      started();
      await tx.query(`select count(*) from ${q}.queues`);
    }).finally(() => dutyDone = true);
    await inDuty;
    await waitFor(
      async () =>
        (await client.sql.unsafe(
          `select 1 from pg_stat_activity where wait_event_type = 'Lock' and query = $1`,
          [`select count(*) from ${q}.queues`],
        )).length > 0,
      10_000,
      "A's duty statement to wait for the lock",
    );
    // While A's duty runs, B's attempt returns without the term and without waiting for the duty.
    assert.equal(await b.tick(), false, "the row is held by A's duty");
    assert.equal(dutyDone, false, "B returned while the duty was still in flight");
    // A's own renewal (renewed_at only) does not queue behind its duty's hold on the row: were it to, a
    // leader whose event loop blocked would have it renew the term when PostgreSQL ended the duty.
    clock.advance(a.renewEveryMs);
    const before = (await client.sql.unsafe(`select renewed_at from ${q}.leadership`))[0].renewed_at as Date;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const renewal = await Promise.race([
      a.tick().then((leads) => leads ? "renewed" : "lost"),
      new Promise<string>((r) => timer = setTimeout(() => r("waited for the duty"), 5_000)),
    ]).finally(() => clearTimeout(timer));
    assert.equal(renewal, "renewed");
    assert.equal(dutyDone, false, "A renewed while its duty was still in flight");
    const after = (await client.sql.unsafe(`select renewed_at from ${q}.leadership`))[0].renewed_at as Date;
    assert.ok(after > before, "the renewal moved renewed_at");
    unblock!();
    await duty;
    // A renews when its next renewal is due: the term is fresh again.
    clock.advance(a.renewEveryMs);
    assert.equal(await a.tick(), true);
    assert.equal(await b.tick(), false);
  } finally {
    unblock?.();
    await blocking.catch(() => {});
    await blocker.end();
    await a.resign();
    await b.resign();
    await drop();
  }
});

/** The runtime id and process of the current term's holder. */
/** For a late hand-over: the term, what every session of the database does and waits for, the workers' last lines. */
async function sessions(client: Client, procs: Proc[]): Promise<string> {
  const waits = await client.sql.unsafe(
    `select a.pid, a.state, a.wait_event_type, a.wait_event, left(a.query, 100) as query,
            (now() - a.state_change)::text as for, (now() - a.xact_start)::text as xact,
            (select string_agg(l.locktype || ':' || l.mode || (case when l.granted then '' else ' (waiting)' end), ',')
               from pg_locks l where l.pid = a.pid and l.locktype <> 'virtualxid') as locks
       from pg_stat_activity a where a.datname = current_database() and a.pid <> pg_backend_pid()`,
  );
  const [row] = await client.sql.unsafe(
    `select holder, term, (now() - renewed_at)::text as age from ${client.names.q}.leadership`,
  );
  return JSON.stringify({ leadership: row, waits, lines: procs.map((p) => p.lines.slice(-8)) });
}

async function leaderProc(client: Client, procs: Proc[]): Promise<{ id: string; proc: Proc; other: Proc }> {
  const holder = await waitFor(async () => (await term(client)).holder, 10_000, "a leader");
  const i = procs.findIndex((p) => p.lines.includes(`started ${holder}`));
  assert.ok(i >= 0, `holder ${holder} is one of ours`);
  return { id: holder!, proc: procs[i], other: procs[1 - i] };
}

Deno.test("a leader stopped with SIGSTOP is replaced within leaderTtl + an election; resumed, it no longer leads", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const env = { ELECTION_MS: "300", LEADER_TTL_MS: "2000", RESCUE_MS: "60000" };
  const procs = [spawnWorker(schema, env), spawnWorker(schema, env)];
  let stopped: Proc | null = null;
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    const { proc, other } = await leaderProc(client, procs);
    const before = await term(client);
    proc.child.kill("SIGSTOP");
    stopped = proc;
    const t0 = Date.now();
    // A scheduled job needs the leader's promotion.
    const job = await client.enqueue("tick", {}, { runAt: new Date(Date.now() + 300) });
    // What the sessions wait for when the hand-over is late (once in CI: no takeover within 15 s).
    let late = "";
    const [effect] = (await waitFor(
      async () => {
        if (!late && Date.now() - t0 > 6_000) late = await sessions(client, [proc, other]);
        const rows = await client.sql.unsafe(`select pid from "${schema}".effects where job_id = $1`, [
          job.id,
        ]);
        return rows.length ? rows : null;
      },
      15_000,
      "the scheduled job to run under a new leader",
    ).catch((e) => {
      throw new Error(`${(e as Error).message}; at 6 s: ${late}`);
    }))!;
    const took = Date.now() - t0;
    // The slack is for a loaded machine (CI runs test files side by side; on 2026-11-28's machine every wake-up
    // cost milliseconds and the other process's election ticks came seconds late); a term that never lapsed
    // fails the wait above.
    assert.ok(
      took < 2_000 + 300 + 20_000,
      `promoted after ${took} ms (TTL 2 s, election 0.3 s); at 6 s: ${late}`,
    );
    assert.equal(effect.pid, other.child.pid, "run by the process that took over");
    const after = await term(client);
    assert.equal(after.term, before.term + 1);
    assert.notEqual(after.holder, before.holder);
    // Resumed, the former leader finds its session ended and does not lead again.
    proc.child.kill("SIGCONT");
    stopped = null;
    await sleep(1_500);
    assert.deepEqual(await term(client), after);
    const shown = (await client.listRuntimes()).filter((r) => r.leader);
    assert.equal(shown.length, 1, "one leader shown");
    assert.equal(shown[0].id, after.holder);
    const runs = await client.sql.unsafe(`select count(*)::int as n from "${schema}".effects`);
    assert.equal(runs[0].n, 1, "the job ran once");
  } finally {
    stopped?.child.kill("SIGCONT");
    await Promise.all(procs.map((p) => p.kill("SIGKILL")));
    await drop();
  }
});

Deno.test("a handler that blocks the leader's event loop: another process takes over, promotes and rescues the overdue attempt", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const env = { ELECTION_MS: "300", LEADER_TTL_MS: "2000", RESCUE_MS: "60000" };
  // A serves only `spin` (and leads, having started first); B serves `default`.
  const a = spawnWorker(schema, { ...env, QUEUES: "spin", SPIN_MS: "12000", SPIN_TIMEOUT_MS: "500" });
  let b: Proc | null = null;
  try {
    const aId = (await a.waitLine(/^started /)).slice("started ".length);
    await waitFor(async () => (await term(client)).holder === aId, 10_000, "A to lead");
    b = spawnWorker(schema, env);
    await b.waitLine(/^started /);
    const spin = await client.enqueue("spin", {}, { queue: "spin", maxAttempts: 1 });
    await waitFor(
      async () => (await client.getJob(spin.id))!.state === "running",
      10_000,
      "A to start spinning",
    );
    const t0 = Date.now();
    const job = await client.enqueue("tick", {}, { runAt: new Date(Date.now() + 300) });
    // What the sessions wait for when the hand-over is late (once in CI: 12.2 s on canonical, not seen since).
    let late = "";
    await waitFor(
      async () => {
        if (!late && Date.now() - t0 > 6_000) late = await sessions(client, [a, b!]);
        return (await client.sql.unsafe(`select 1 from "${schema}".effects where job_id = $1`, [job.id]))
          .length;
      },
      15_000,
      "the scheduled job to run while A spins",
    );
    const promoted = Date.now() - t0;
    // leaderTtl + an election is 2.3 s; the bound leaves a loaded machine room and still fails the regression
    // this test was written for (the term renewed by the blocked leader: 10-14 s, after A's 12 s spin).
    assert.ok(
      promoted < 8_000,
      `promoted after ${promoted} ms while the leader was blocked; at 6 s: ${late}`,
    );
    // The spinning attempt passed its 0.5 s deadline: the new leader rescues it (its last attempt: failed).
    const rescued = await waitFor(
      async () => {
        const j = await client.getJob(spin.id);
        return j?.state === "failed" ? j : null;
      },
      10_000,
      "the overdue attempt to be rescued",
    );
    assert.ok(Date.now() - t0 < 11_000, "rescued while A still spins");
    assert.match(rescued!.errors[0].error, /deadline/);
    // When A's handler returns, its completion of the rescued attempt changes nothing.
    await waitFor(async () => (await term(client)).holder !== aId, 1_000, "B to hold the term");
    await sleep(Math.max(0, 12_500 - (Date.now() - t0)));
    const final = (await client.getJob(spin.id))!;
    assert.equal(final.state, "failed");
    assert.equal(final.result, null);
  } finally {
    await a.kill("SIGKILL");
    await b?.kill("SIGKILL");
    await drop();
  }
});

Deno.test("cleanup deletes the rows of runtimes dead for an hour and keeps the others", async () => {
  const { client, drop } = await testClient();
  try {
    for (const id of ["old", "recent", "live"]) {
      await client.engine.upsertRuntime({
        id,
        hostname: "h",
        pid: 1,
        queues: [],
        ready: true,
        leader: false,
        health: {},
      });
    }
    await client.sql.unsafe(
      `update ${client.names.q}.runtimes set heartbeat_at = now() - case id when 'old' then interval '61 minutes'
                                                                          else interval '5 minutes' end
        where id in ('old', 'recent')`,
    );
    await client.engine.cleanup({ completed: 86_400_000, failed: 86_400_000 });
    const ids = (await client.sql.unsafe(`select id from ${client.names.q}.runtimes order by id`)).map((r) =>
      r.id
    );
    assert.deepEqual(ids, ["live", "recent"]);
  } finally {
    await drop();
  }
});

Deno.test("runtimes.leader: a row left saying leader by a killed process is set right by the next heartbeat once another holds the term", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    // The row of a leader killed with -9: it says leader, stopped heartbeating, and its term lapsed.
    await client.engine.upsertRuntime({
      id: "killed",
      hostname: "h",
      pid: 1,
      queues: ["default"],
      ready: true,
      leader: true,
      health: {},
    });
    await client.sql.unsafe(
      `update ${client.names.q}.runtimes set heartbeat_at = now() - interval '5 minutes' where id = 'killed';
       update ${client.names.q}.leadership set holder = 'killed', term = term + 1,
              renewed_at = now() - interval '5 minutes'`,
    );
    w = await startWorker(client, { leaderTtl: 1_000 });
    const worker = w.worker;
    await waitFor(() => worker.isLeader, 15_000, "the worker to take the term");
    const rows = await waitFor(
      async () => {
        const r = await client.sql.unsafe(`select id, leader from ${client.names.q}.runtimes order by id`);
        return r.find((x) => x.id === "killed")?.leader === false && r.find((x) => x.id === worker.id)?.leader
          ? r
          : null;
      },
      10_000,
      "the killed row to stop saying leader",
    );
    assert.deepEqual(rows!.filter((r) => r.leader).map((r) => r.id), [worker.id]);
    const listed = await client.listRuntimes();
    assert.deepEqual(listed.filter((r) => r.leader).map((r) => r.id), [worker.id]);
  } finally {
    await w?.stop();
    await drop();
  }
});

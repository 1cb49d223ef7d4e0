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
import { testClient, waitFor } from "../helpers/db.ts";
import { type Proc, spawnWorker } from "../helpers/process.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function election(client: Client, id: string, ttlMs: number): LeaderElection {
  return new LeaderElection(client.driver.leaderLock(client.names.leaderLockKey), silentLogger, () => {}, {
    db: client.db,
    names: client.names,
    id,
    key: client.names.leaderLockKey,
    ttlMs,
  });
}

async function term(client: Client): Promise<{ holder: string | null; term: number }> {
  const [r] = await client.sql.unsafe(`select holder, term from ${client.names.q}.leadership`);
  return { holder: r.holder, term: Number(r.term) };
}

Deno.test("leader term: renewed while the leader ticks; taken over once it stops; the former leader's writes are fenced", async () => {
  const { client, drop } = await testClient();
  // A TTL far above a tick's round trip, so that a loaded machine does not make A look stalled.
  const a = election(client, "A", 5_000);
  const b = election(client, "B", 5_000);
  try {
    assert.equal(await a.tick(), true);
    assert.equal(await b.tick(), false);
    assert.deepEqual(await term(client), { holder: "A", term: 1 });
    // A keeps renewing: B never takes over, however often it tries.
    for (let i = 0; i < 12; i++) {
      await sleep(150);
      assert.equal(await a.tick(), true);
      assert.equal(await b.tick(), false, `tick ${i}`);
    }
    // A stalls. B takes over once the term is older than the TTL, not before.
    await sleep(1_000);
    assert.equal(await b.tick(), false, "the term is not stale yet");
    await sleep(5_000);
    assert.equal(await b.tick(), true, "taken over");
    assert.deepEqual(await term(client), { holder: "B", term: 2 });
    // A duty of A's now writes nothing: its lock session was ended.
    await client.sql.unsafe(`insert into ${client.names.q}.queues (name, paused) values ('fence', false)`);
    await assert.rejects(
      a.fenced.query(`update ${client.names.q}.queues set paused = true where name = 'fence'`),
      (e) => e instanceof NotLeaderError || e instanceof Error,
    );
    const [q] = await client.sql.unsafe(`select paused from ${client.names.q}.queues where name = 'fence'`);
    assert.equal(q.paused, false, "the stale leader's write did not land");
    assert.equal(await a.tick(), false, "A notices it no longer leads");
    assert.equal(await b.tick(), true);
    // B's duties do write.
    await b.fenced.query(`update ${client.names.q}.queues set paused = true where name = 'fence'`);
    const [q2] = await client.sql.unsafe(`select paused from ${client.names.q}.queues where name = 'fence'`);
    assert.equal(q2.paused, true);
    // A stale A that takes the lock again in between cannot write under B's term either.
    await assert.rejects(a.fenced.query(`select 1`), NotLeaderError);
  } finally {
    await a.resign();
    await b.resign();
    await drop();
  }
});

/** The runtime id and process of the current term's holder. */
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
    const [effect] = (await waitFor(
      async () => {
        const rows = await client.sql.unsafe(`select pid from "${schema}".effects where job_id = $1`, [
          job.id,
        ]);
        return rows.length ? rows : null;
      },
      15_000,
      "the scheduled job to run under a new leader",
    ))!;
    const took = Date.now() - t0;
    assert.ok(took < 2_000 + 300 + 2_500, `promoted after ${took} ms (TTL 2 s, election 0.3 s)`);
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
  const a = spawnWorker(schema, { ...env, QUEUES: "spin", SPIN_MS: "9000", SPIN_TIMEOUT_MS: "500" });
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
    await waitFor(
      async () =>
        (await client.sql.unsafe(`select 1 from "${schema}".effects where job_id = $1`, [job.id])).length,
      15_000,
      "the scheduled job to run while A spins",
    );
    const promoted = Date.now() - t0;
    assert.ok(promoted < 2_000 + 300 + 2_500, `promoted after ${promoted} ms while the leader was blocked`);
    // The spinning attempt passed its 0.5 s deadline: the new leader rescues it (its last attempt: failed).
    const rescued = await waitFor(
      async () => {
        const j = await client.getJob(spin.id);
        return j?.state === "failed" ? j : null;
      },
      10_000,
      "the overdue attempt to be rescued",
    );
    assert.ok(Date.now() - t0 < 8_000, "rescued while A still spins");
    assert.match(rescued!.errors[0].error, /deadline/);
    // When A's handler returns, its completion of the rescued attempt changes nothing.
    await waitFor(async () => (await term(client)).holder !== aId, 1_000, "B to hold the term");
    await sleep(Math.max(0, 9_500 - (Date.now() - t0)));
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

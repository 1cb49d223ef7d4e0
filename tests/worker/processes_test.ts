import assert from "node:assert/strict";
import { allJobsSql, testClient, waitFor } from "../helpers/db.ts";
import { spawnWorker } from "../helpers/process.ts";

Deno.test("10,000 jobs by 3 worker processes: every effect exactly once, none lost, none left running", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  // Rescue is not under test here: a generous rescueAfter keeps a CPU-starved heartbeat from re-running jobs.
  const procs = [1, 2, 3].map(() => spawnWorker(schema, { RESCUE_MS: "60000" }));
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    for (let i = 0; i < 10; i++) {
      await client.enqueueMany(
        Array.from({ length: 1000 }, (_, j) => ({ kind: "effect", args: { n: i * 1000 + j } })),
      );
    }
    await waitFor(
      async () => {
        const [r] = await client.sql.unsafe(
          `select count(*)::int as n from ${allJobsSql(schema)} j where state = 'completed'`,
        );
        return r.n === 10_000;
      },
      120_000,
      "all completed",
    );
    const [e] = await client.sql.unsafe(
      `select count(*)::int as total, count(distinct job_id)::int as distinct_jobs, count(distinct pid)::int as pids
         from "${schema}".effects`,
    );
    if (e.total !== 10_000) {
      console.log(
        await client.sql.unsafe(
          `select id, attempt, lease, errors from ${
            allJobsSql(schema)
          } j where attempt <> 1 or lease <> 1 limit 5`,
        ),
      );
      console.log(
        await client.sql.unsafe(
          `select job_id, array_agg(pid) from "${schema}".effects group by job_id having count(*) > 1 limit 5`,
        ),
      );
    }
    assert.equal(e.total, 10_000, "each effect recorded once");
    assert.equal(e.distinct_jobs, 10_000);
    assert.equal(e.pids, 3, "all three processes worked");
    const [s] = await client.sql.unsafe(
      `select count(*) filter (where state <> 'completed')::int as other,
              count(*) filter (where attempt <> 1)::int as retried from ${allJobsSql(schema)} j`,
    );
    assert.equal(s.other, 0, "none lost or left running");
    assert.equal(s.retried, 0);
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
});

Deno.test("kill -9 mid-job: another process rescues and completes it; the stale attempt changes nothing", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const a = spawnWorker(schema, { MODE: "block" });
  let b: ReturnType<typeof spawnWorker> | null = null;
  try {
    await a.waitLine(/^started /);
    const job = await client.enqueue("block", {}, { maxAttempts: 3 });
    await a.waitLine(new RegExp(`^running ${job.id}$`));
    const running = (await client.getJob(job.id))!;
    assert.equal(running.state, "running");
    await a.kill("SIGKILL");

    // B (MODE b) finishes `block` jobs. Its rescue window is wide enough that a loaded machine does not
    // make B's own attempt look stale (which would rescue it once more: attempt 3).
    b = spawnWorker(schema, { MODE: "b", RESCUE_MS: "5000" });
    await b.waitLine(/^started /);
    await waitFor(
      async () => (await client.getJob(job.id))!.state === "completed",
      40_000,
      "rescued and completed",
    );
    const done = (await client.getJob(job.id))!;
    assert.equal(done.attempt, 2);
    assert.equal(done.lease, running.lease + 1);
    assert.match(done.errors[0].error, /rescued: heartbeat stale/);
    assert.equal(done.result, "b");
    // The killed attempt's completion arrives late: nothing changes.
    assert.deepEqual(
      await client.engine.complete([{ id: job.id, lease: running.lease, result: "stale" }], true),
      [],
    );
    assert.equal(
      await client.engine.fail({
        id: job.id,
        lease: running.lease,
        error: "late",
        terminal: true,
        retryDelayMs: 0,
      }),
      null,
    );
    const after = (await client.getJob(job.id))!;
    assert.equal(after.state, "completed");
    assert.equal(after.result, "b");
  } finally {
    await a.kill();
    await b?.kill("SIGTERM");
    await drop();
  }
});

Deno.test("leader failover: a new leader within the election interval, never two at once, duties go on", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const key = client.names.leaderLockKey;
  const hi = Math.floor(key / 2 ** 32);
  const lo = key % 2 ** 32;
  const holders = async (): Promise<number[]> =>
    (await client.sql.unsafe(
      `select pid from pg_locks where locktype = 'advisory' and granted and classid = $1::bigint::oid and objid = $2::bigint::oid and objsubid = 1`,
      [hi, lo],
    )).map((r) => r.pid as number);
  const procs = [spawnWorker(schema, { ELECTION_MS: "300" }), spawnWorker(schema, { ELECTION_MS: "300" })];
  let maxHolders = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      maxHolders = Math.max(maxHolders, (await holders()).length);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    await waitFor(async () => (await holders()).length === 1, 10_000, "a leader");
    const leaderRow = await waitFor(
      async () => {
        const rows = await client.sql.unsafe(`select id, pid from "${schema}".runtimes where leader`);
        return rows.length === 1 ? rows[0] : null;
      },
      10_000,
      "leader row",
    ) as unknown as { id: string; pid: number };
    const [oldBackend] = await holders();
    const leaderIdx = procs.findIndex((p) => p.lines.some((l) => l === `started ${leaderRow.id}`));
    assert.ok(leaderIdx >= 0);
    await procs[leaderIdx].kill("SIGKILL");
    const killedAt = Date.now();
    // PostgreSQL notices the dead backend; the lock is freed and the survivor takes it.
    await waitFor(
      async () => (await holders()).length === 1 && !(await holders()).includes(oldBackend),
      10_000,
      "new leader",
    );
    const took = Date.now() - killedAt;
    assert.ok(took < 300 + 2000, `new leader after ${took} ms`);
    // Promotion goes on under the new leader: a scheduled job runs.
    const j = await client.enqueue("tick", {}, { runAt: new Date(Date.now() + 200) });
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 10_000, "promoted and run");
    sampling = false;
    await sampler;
    assert.equal(maxHolders, 1, "never two leaders");
  } finally {
    sampling = false;
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
});

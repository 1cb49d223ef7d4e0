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
    // First every job's effect (a cheap count, polled while the workers run), then every job completed (the
    // job listing reads every retained job: read once the work is done).
    await waitFor(
      async () =>
        (await client.sql.unsafe(`select count(distinct job_id)::int as n from "${schema}".effects`))[0].n ===
          10_000,
      600_000,
      "every job's effect",
    );
    await waitFor(
      async () => {
        const [r] = await client.sql.unsafe(
          `select count(*)::int as n from ${allJobsSql(schema)} j where state = 'completed'`,
        );
        return r.n === 10_000;
      },
      60_000,
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
      await client.engine.complete([{ id: job.id, lease: running.lease, result: "stale" }], {
        keepCompleted: true,
      }),
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

Deno.test("leader failover: a leader killed with SIGKILL is replaced within leaderTtl + an election, the term moves once, duties go on", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const holder = async (): Promise<string | null> =>
    (await client.sql.unsafe(`select holder from ${client.names.q}.leadership`))[0].holder;
  const env = { ELECTION_MS: "300", LEADER_TTL_MS: "2000" };
  const procs = [spawnWorker(schema, env), spawnWorker(schema, env)];
  // Every holder the term had, in order (a change back to a former holder would be a second leader).
  const seen: string[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const h = await holder();
      if (h !== null && seen.at(-1) !== h) seen.push(h);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    const leaderId = await waitFor(holder, 10_000, "a leader");
    const leaderIdx = procs.findIndex((p) => p.lines.some((l) => l === `started ${leaderId}`));
    assert.ok(leaderIdx >= 0);
    await procs[leaderIdx].kill("SIGKILL");
    const killedAt = Date.now();
    // The term lapses after the TTL; the survivor takes the next one at its next election.
    const next = await waitFor(
      async () => {
        const h = await holder();
        return h !== null && h !== leaderId ? h : null;
      },
      10_000,
      "new leader",
    );
    const took = Date.now() - killedAt;
    // The slack is for a loaded machine (CI runs test files side by side); a term that never lapsed fails at 10 s.
    assert.ok(took < 2000 + 300 + 5000, `new leader after ${took} ms (TTL 2 s, election 0.3 s)`);
    assert.ok(procs[1 - leaderIdx].lines.includes(`started ${next}`), "the survivor leads");
    // Promotion goes on under the new leader: a scheduled job runs.
    const j = await client.enqueue("tick", {}, { runAt: new Date(Date.now() + 200) });
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 10_000, "promoted and run");
    sampling = false;
    await sampler;
    assert.deepEqual(seen, [leaderId, next], "the term moved once");
  } finally {
    sampling = false;
    await sampler;
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await drop();
  }
});

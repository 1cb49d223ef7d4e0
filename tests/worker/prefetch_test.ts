/**
 * Prefetch (docs/reference/configuration.md, "Queues"): jobs claimed ahead of free slots are held with
 * their attempt counted at claim and start when a slot frees, with nothing written (the completion carries
 * the handler's start: `attempted_at`); they go back with the attempt refunded and their run_at kept after
 * `prefetchTtl`, at shutdown and when their queue is paused; after a kill -9 every held job is rescued with
 * its attempt consumed, so a job on its last attempt fails (nothing is lost). Two processes with the same
 * settings share a backlog fairly.
 */
import assert from "node:assert/strict";
import type { Client } from "../../src/client/client.ts";
import type { Job } from "../../src/types.ts";
import { countJobs, DATABASE_URL, testClient, waitFor } from "../helpers/db.ts";
import { spawnWorker } from "../helpers/process.ts";
import { claimsRun, startWorker } from "../helpers/worker.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A gate a handler waits on. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => open = r);
  return { wait, open };
}

async function jobs(client: Client, ids: number[]): Promise<Job[]> {
  return await Promise.all(ids.map(async (id) => (await client.getJob(id))!));
}

Deno.test("prefetch: jobs held ahead start as slots free with their attempt counted at claim; attempted_at is their start, each runs once", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const enq = await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ kind: "s", args: { i } })));
    const started: number[] = [];
    const g = gate();
    w = await startWorker(client, {
      queues: { default: { maxWorkers: 1, prefetch: 5 } },
      handlers: {
        s: async (job) => {
          started.push(Date.now());
          await g.wait;
          await sleep(100);
          return job.attemptedAt?.getTime() ?? null;
        },
      },
    });
    // One running and five held: all six are `running` in the database, each on its first attempt.
    await waitFor(async () => (await countJobs(client, "state = 'running'")) === 6, 10_000, "6 claimed");
    for (const j of await jobs(client, enq.map((j) => j.id))) {
      assert.equal(j.attempt, 1, "counted at claim");
      // Storage knows the claim only; the start is written with the outcome.
      assert.ok(j.claimedAt instanceof Date, "claimed_at set at claim");
      assert.equal(j.attemptedAt, null, "attempted_at null while the attempt runs or is held");
    }
    assert.equal(started.length, 1, "one slot: one handler started");
    // The heartbeat tells them apart (the UI's Running page and dashboard): 1 in flight, 5 held, named.
    const rt = (await waitFor(
      async () => {
        const r = (await client.listRuntimes()).find((r) => r.id === w!.worker.id);
        return r?.held === 5 ? r : null;
      },
      10_000,
      "the heartbeat reports 5 held",
    ))!;
    assert.equal(rt.inFlight, 1);
    const running = new Set(enq.map((j) => j.id));
    assert.equal(rt.heldJobs!.length, 5);
    for (const id of rt.heldJobs!) assert.ok(running.has(id), `held job ${id} is one of ours`);
    g.open();
    await waitFor(async () => (await countJobs(client, "state = 'completed'")) === 6, 10_000, "all done");
    const done = (await jobs(client, enq.map((j) => j.id))).sort((a, b) => +a.attemptedAt! - +b.attemptedAt!);
    for (const j of done) {
      assert.equal(j.attempt, 1);
      assert.ok(+j.attemptedAt! >= +j.claimedAt!, "started at or after its claim");
    }
    // The held ones waited in the buffer: their start is well after their claim (one slot, 100 ms each).
    assert.ok(
      +done[5].attemptedAt! - +done[5].claimedAt! >= 400,
      "the last held job started 400+ ms after its claim",
    );
    for (let i = 1; i < done.length; i++) {
      const gap = +done[i].attemptedAt! - +done[i - 1].attemptedAt!;
      assert.ok(gap >= 90, `job ${i} started ${gap} ms after the one before (one slot, 100 ms each)`);
    }
    assert.equal(started.length, 6);
  } finally {
    await w?.stop();
    await drop();
  }
});

Deno.test("prefetch: a job held longer than prefetchTtl goes back with its attempt refunded and its run_at kept", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  const g = gate();
  try {
    const [slow] = await client.enqueueMany([{ kind: "slow" }]);
    const quick = await client.enqueueMany(Array.from({ length: 3 }, () => ({ kind: "quick" })));
    w = await startWorker(client, {
      queues: { default: { maxWorkers: 1, prefetch: 3, prefetchTtl: 300 } },
      handlers: { slow: () => g.wait, quick: () => "ok" },
    });
    await waitFor(async () => (await client.getJob(slow.id))!.state === "running", 10_000, "slow runs");
    // While the slot is taken, the quick jobs are held, given back after 300 ms, held again...
    const during = (await waitFor(
      async () => {
        const js = await jobs(client, quick.map((j) => j.id));
        return js.every((j) => j.lease >= 2) ? js : null;
      },
      10_000,
      "each quick job to be held a second time",
    ))!;
    for (const [i, j] of during.entries()) {
      assert.ok(j.state === "running" || j.state === "available", j.state);
      assert.ok(j.lease >= 2, `job ${j.id} was claimed more than once (lease ${j.lease})`);
      assert.ok(j.attempt <= 1, `held at most once at a time (attempt ${j.attempt})`);
      assert.equal(+j.runAt, +quick[i].runAt, "the give-back keeps the job's run_at");
    }
    g.open();
    await waitFor(async () => (await countJobs(client, "state = 'completed'")) === 4, 10_000, "all done");
    for (const j of await jobs(client, quick.map((j) => j.id))) {
      assert.equal(j.attempt, 1, "the give-backs consumed no attempt");
      assert.deepEqual(j.errors, []);
    }
  } finally {
    g.open();
    await w?.stop();
    await drop();
  }
});

for (const how of ["shutdown", "pause"] as const) {
  Deno.test(`prefetch: held jobs go back at once on ${how}, their attempt refunded and run_at kept; the running one goes on`, async () => {
    const { client, drop } = await testClient();
    let w: Awaited<ReturnType<typeof startWorker>> | undefined;
    const g = gate();
    try {
      const [slow] = await client.enqueueMany([{ kind: "slow" }]);
      const rest = await client.enqueueMany(Array.from({ length: 5 }, () => ({ kind: "quick" })));
      w = await startWorker(client, {
        queues: { default: { maxWorkers: 1, prefetch: 5, prefetchTtl: 60_000 } },
        handlers: { slow: () => g.wait, quick: () => "ok" },
      });
      await waitFor(async () => (await countJobs(client, "state = 'running'")) === 6, 10_000, "6 claimed");
      const stopping = how === "shutdown" ? w.stop(10_000) : client.pauseQueue("default");
      // At once, not when their prefetchTtl (60 s) ends; the wait leaves room for a slow machine.
      await waitFor(
        async () => (await jobs(client, rest.map((j) => j.id))).every((j) => j.state === "available"),
        30_000,
        "the held jobs to be available again",
      );
      for (const [i, j] of (await jobs(client, rest.map((j) => j.id))).entries()) {
        assert.equal(j.attempt, 0);
        assert.equal(+j.runAt, +rest[i].runAt, "run_at kept");
      }
      assert.equal((await client.getJob(slow.id))!.state, "running", "the running attempt goes on");
      g.open();
      await stopping;
      await waitFor(async () => (await client.getJob(slow.id))!.state === "completed", 10_000, "slow done");
      if (how === "pause") {
        // Two claim statements with the slot free again: the worker looked at the paused queue and took nothing.
        const claims = await claimsRun();
        await waitFor(async () => await claimsRun() >= claims + 2, 10_000, "two claims on the paused queue");
        for (const j of await jobs(client, rest.map((j) => j.id))) {
          assert.equal(j.state, "available", "paused");
        }
      }
    } finally {
      g.open();
      await w?.stop();
      await drop();
    }
  });
}

Deno.test("prefetch: kill -9 with a full buffer: every held job is rescued with its attempt consumed; nothing is lost", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  // The killed worker's sessions carry a name of their own: a statement it sent just before it died can
  // still commit in its backend, so the test reads what started only once those sessions have ended.
  const tag = `pk-${schema}`.slice(0, 63);
  const taggedUrl = `${DATABASE_URL}${DATABASE_URL.includes("?") ? "&" : "?"}application_name=${tag}`;
  const a = spawnWorker(schema, {
    DATABASE_URL: taggedUrl,
    MAX_WORKERS: "1",
    PREFETCH: "50",
    SLOW_MS: "400",
    RESCUE_MS: "1000",
  });
  let b: ReturnType<typeof spawnWorker> | undefined;
  try {
    await a.waitLine(/^started /);
    const enq = await client.enqueueMany(
      Array.from({ length: 40 }, () => ({ kind: "slow", maxAttempts: 1 })),
    );
    await waitFor(async () => (await countJobs(client, "state = 'running'")) === 40, 10_000, "all 40 held");
    // One has started (its handler's first statement records it).
    await waitFor(
      async () => (await client.sql.unsafe(`select 1 from "${schema}".effects limit 1`)).length,
      10_000,
      "a handler to start",
    );
    const sessions = async () =>
      (await client.sql.unsafe(`select 1 from pg_stat_activity where application_name = $1`, [tag])).length;
    assert.ok(await sessions() > 0, "the worker's sessions carry the tag");
    await a.kill("SIGKILL");
    await waitFor(async () => await sessions() === 0, 10_000, "the killed worker's sessions to end");
    b = spawnWorker(schema, { MAX_WORKERS: "20", SLOW_MS: "10", RESCUE_MS: "1000" });
    await waitFor(
      async () => (await countJobs(client, "state in ('completed', 'failed')")) === 40,
      30_000,
      "every job to finish",
    );
    // Each job had one attempt, consumed when the dead worker claimed it: a held job's attempt counts like a
    // started one's (a job that kills its worker must run out of attempts). A job that completed before the
    // kill is completed; every other one failed with the rescue's reason. None ran twice.
    const ran = new Map<number, number>();
    for (const r of await client.sql.unsafe(`select job_id from "${schema}".effects`)) {
      ran.set(Number(r.job_id), (ran.get(Number(r.job_id)) ?? 0) + 1);
    }
    let failed = 0;
    for (const j of await jobs(client, enq.map((j) => j.id))) {
      assert.equal(j.attempt, 1, `job ${j.id}`);
      assert.ok((ran.get(j.id) ?? 0) <= 1, `job ${j.id} ran ${ran.get(j.id)} times`);
      if (j.state === "failed") {
        failed++;
        assert.match(j.errors.at(-1)!.error, /rescued: heartbeat stale/);
        // No start was reported: the rescue writes the claim time as the attempt's start.
        assert.equal(+j.attemptedAt!, +j.claimedAt!, `job ${j.id}: rescued attempt's start is its claim`);
      } else assert.equal(j.state, "completed", `${j.id}: ${j.state}`);
    }
    assert.ok(failed > 30, `most were still held when the process died (${failed} failed)`);
  } finally {
    await a.kill("SIGKILL");
    await b?.kill("SIGKILL");
    await drop();
  }
});

Deno.test("prefetch: two processes with the same settings each run 35-65 % of 20,000 jobs", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  // A long rescueAfter: on a loaded machine a late heartbeat must not rescue (and rerun) a held job.
  const env = { MAX_WORKERS: "10", PREFETCH: "500", RESCUE_MS: "30000", EFFECTS_ASYNC: "1" };
  const procs = [spawnWorker(schema, env), spawnWorker(schema, env)];
  try {
    await Promise.all(procs.map((p) => p.waitLine(/^started /)));
    for (let i = 0; i < 20_000; i += 2_000) {
      await client.enqueueMany(Array.from({ length: 2_000 }, () => ({ kind: "effect" })));
    }
    await waitFor(
      async () => (await countJobs(client, "state = 'completed'")) === 20_000,
      300_000,
      "the backlog to drain",
    );
    const rows = await client.sql.unsafe(
      `select pid, count(*)::int as n from "${schema}".effects group by pid order by pid`,
    );
    assert.equal(rows.length, 2, JSON.stringify(rows));
    // Not even: on two cores shared with the server, the process that gets the CPU first refills its buffer
    // more often (eight runs alone on this machine, four at this commit and four before its session: 37.6-62.4 %).
    // What this bounds is a process hoarding the backlog.
    for (const r of rows) {
      const share = r.n / 20_000;
      assert.ok(share >= 0.35 && share <= 0.65, `process ${r.pid} ran ${(share * 100).toFixed(1)} %`);
    }
    const [dup] = await client.sql.unsafe(
      `select count(*)::int as n from (select job_id from "${schema}".effects group by 1 having count(*) > 1) x`,
    );
    assert.equal(dup.n, 0, "no job ran twice");
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGKILL")));
    await drop();
  }
});

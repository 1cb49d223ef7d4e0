/**
 * Per-minute samples (schema version 5): the depth definition, the finished attempts of a minute per
 * (queue, kind) on the engine under test, the leader's once-per-minute write (idempotent, fenced), and
 * their REST surfaces (GET /api/stats/samples, the last hour of GET /api/kinds).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { DATABASE_URL, TEST_ENGINE, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { adminFixture } from "../helpers/admin.ts";
import type { KindMinute } from "../../src/storage/engine.ts";
import { readKindMinute } from "../../src/storage/shared/samples.ts";

/** The minute (by the database's clock) that starts at or before now. */
async function dbMinute(sql: postgres.Sql): Promise<Date> {
  const [r] = await sql`select date_trunc('minute', now()) as m`;
  return new Date(r.m);
}

/** kind_minute rows of two consecutive minutes added up per (queue, kind) (a run may straddle a minute). */
function addUp(rows: KindMinute[]): Map<string, KindMinute> {
  const out = new Map<string, KindMinute>();
  for (const r of rows) {
    const key = `${r.queue}/${r.kind}`;
    const cur = out.get(key);
    if (!cur) out.set(key, { ...r });
    else {
      cur.completed += r.completed;
      cur.failed += r.failed;
      cur.retried += r.retried;
    }
  }
  return out;
}

Deno.test(`samples (${TEST_ENGINE}): depth per queue, and completed, failed and retried attempts per kind`, async () => {
  const { client, drop } = await testClient();
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    // Depth: 7 waiting in "backlog" (no worker), 3 of them at another priority; none in "idle".
    await client.enqueueMany(Array.from({ length: 7 }, (_, i) => ({
      kind: "wait",
      queue: "backlog",
      priority: i < 3 ? 1 : 3,
    })));
    const depths = await client.engine.queueDepths();
    const backlog = depths.find((d) => d.queue === "backlog");
    assert.ok(backlog, `backlog in ${JSON.stringify(depths)}`);
    assert.equal(backlog.depth, 7);
    assert.equal(backlog.estimated, false);
    assert.ok(backlog.oldestAvailableAgeSeconds !== null && backlog.oldestAvailableAgeSeconds >= 0);

    const m0 = await dbMinute(sql);
    const runs = new Map<number, number>();
    await client.enqueueMany([
      ...Array.from({ length: 5 }, () => ({ kind: "ok" })),
      ...Array.from({ length: 2 }, () => ({ kind: "bad", maxAttempts: 1 })),
      ...Array.from({ length: 3 }, () => ({ kind: "flaky", maxAttempts: 2 })),
    ]);
    w = await startWorker(client, {
      handlers: {
        ok: async () => {
          await new Promise((r) => setTimeout(r, 20));
          return { ok: true };
        },
        bad: () => {
          throw new Error("always");
        },
        flaky: {
          handler: (job) => {
            runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
            if (job.attempt === 1) throw new Error("first time");
            return "second time";
          },
          backoff: () => 60_000, // the retries wait: counted as retried, not run again in this test
        },
      },
    });
    await waitFor(
      async () =>
        runs.size === 3 && (await client.listJobs({ state: "failed" })).jobs.length === 2 &&
        (await client.listJobs({ state: "completed" })).jobs.length === 5,
      15_000,
      "every first attempt to end",
    );
    await w.stop();
    w = undefined;

    const m1 = new Date(m0.getTime() + 60_000);
    const got = addUp([...await client.engine.kindMinute(m0), ...await client.engine.kindMinute(m1)]);
    const ok = got.get("default/ok"), bad = got.get("default/bad"), flaky = got.get("default/flaky");
    assert.ok(ok && bad && flaky, `rows: ${JSON.stringify([...got.values()])}`);
    assert.deepEqual([ok.completed, ok.failed, ok.retried], [5, 0, 0]);
    assert.deepEqual([bad.completed, bad.failed, bad.retried], [0, 2, 0]);
    assert.deepEqual([flaky.completed, flaky.failed, flaky.retried], [0, 0, 3]);
    assert.ok(ok.runP50Ms !== null && ok.runP50Ms >= 15, `p50 of 20 ms handlers: ${ok.runP50Ms}`);
    assert.ok(ok.runP95Ms !== null && ok.runP95Ms >= ok.runP50Ms);
    assert.equal(got.has("backlog/wait"), false, "waiting jobs did not finish");
  } finally {
    await w?.stop();
    await sql.end();
    await drop();
  }
});

Deno.test(`samples (${TEST_ENGINE}): the leader writes a minute once; REST reads them back`, async () => {
  const f = await adminFixture();
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    const { client, call } = f;
    await client.enqueueMany(Array.from({ length: 4 }, () => ({ kind: "wait", queue: "q1" })));
    // The last finished minute, written by the engine's sampler; a second call writes nothing. Both calls fall
    // in one minute: when under 30 s of it are left, the test waits for the next (a minute that ended between
    // them would make a new last finished minute, on a slow machine).
    const [{ left }] = await sql`select 60 - extract(second from now())::float8 as left`;
    if (left < 30) await new Promise((r) => setTimeout(r, (left + 1) * 1000));
    assert.equal(await client.engine.samples.record(), true);
    assert.equal(await client.engine.samples.record(), false);
    const s = client.schema;
    const [taken] = await sql.unsafe(`select count(*)::int as n from "${s}".samples_taken`);
    assert.equal(taken.n, 1);
    const [q] = await sql.unsafe(`select queue, depth from "${s}".queue_samples`);
    assert.deepEqual({ ...q }, { queue: "q1", depth: "4" });

    // Finished attempts of an earlier minute, written as the sampler writes them.
    const [{ m }] = await sql`select date_trunc('minute', now()) - interval '10 minutes' as m`;
    await sql.unsafe(
      `select "${s}".record_samples($1, '[]', $2::text::jsonb)`,
      [
        new Date(m).toISOString(),
        JSON.stringify([
          { queue: "q1", kind: "k", completed: 9, failed: 1, retried: 0, run_p50_ms: 12.5, run_p95_ms: 40 },
          { queue: "q1", kind: "j", completed: 1, failed: 0, retried: 0, run_p50_ms: 3, run_p95_ms: 3 },
        ]),
      ],
    );
    const all = await call("GET", "/api/stats/samples");
    assert.equal(all.status, 200);
    const rows = all.body.samples as Record<string, unknown>[];
    assert.deepEqual(rows[0], {
      minute: new Date(m).toISOString(),
      queue: "q1",
      kind: "j",
      depth: null,
      completed: 1,
      failed: 0,
      retried: 0,
      run_p50_ms: 3,
      run_p95_ms: 3,
    });
    assert.equal(rows.length, 3);
    const depthRow = rows.find((r) => r.kind === null)!;
    assert.equal(depthRow.depth, 4);
    const onlyK = await call("GET", "/api/stats/samples?kind=k&minutes=30");
    assert.deepEqual(
      onlyK.body.samples.map((r: { kind: string; completed: number }) => [r.kind, r.completed]),
      [
        ["k", 9],
      ],
    );
    assert.equal(
      (await call("GET", "/api/stats/samples?minutes=5")).body.samples.length,
      1,
      "depth row only",
    );
    assert.equal((await call("GET", "/api/stats/samples?minutes=0")).status, 400);
    assert.equal((await call("GET", "/api/stats/samples?queue=no%20such")).status, 400);

    const kinds = await call("GET", "/api/kinds");
    const k = kinds.body.kinds.find((x: { kind: string }) => x.kind === "k");
    assert.deepEqual(
      [k.completed_1h, k.failed_1h, k.failure_rate, k.run_p50_ms, k.run_p95_ms],
      [9, 1, 0.1, 12.5, 40],
    );
  } finally {
    await sql.end();
    await f.drop();
  }
});

Deno.test(`samples (${TEST_ENGINE}): the leader's duty samples the last minute through its fenced connection`, async () => {
  const { client, drop } = await testClient();
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    await client.enqueue("wait", {}, { queue: "elsewhere" });
    w = await startWorker(client, { handlers: {} });
    const s = client.schema;
    const row = await waitFor(
      async () => (await sql.unsafe(`select queue, depth::int as depth from "${s}".queue_samples`))[0],
      15_000,
      "a sample",
    );
    assert.deepEqual({ ...row }, { queue: "elsewhere", depth: 1 });
    const [p] = await sql.unsafe(
      `select count(*)::int as n from pg_tables where schemaname = $1 and tablename like 'kind_samples_%'`,
      [s],
    );
    assert.ok(p.n >= 2, `day partitions created ahead: ${p.n}`);
  } finally {
    await w?.stop();
    await sql.end();
    await drop();
  }
});

Deno.test(`samples (${TEST_ENGINE}): during a transition one aggregate reads both engines' finished attempts`, async () => {
  const { client, drop } = await testClient();
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    const qs = await client.engine.queueStorage();
    assert.ok(qs, "both engines' objects are installed");
    const s = client.schema;
    // One finished job in each engine's own tables, in the same minute.
    const [{ m }] = await sql`select date_trunc('minute', now()) - interval '3 minutes' as m`;
    const at = new Date(new Date(m).getTime() + 10_000).toISOString();
    await sql.unsafe(
      `insert into "${s}".jobs (kind, queue, state, attempt, attempted_at, finalized_at)
       values ('mixed', 'q', 'completed', 1, $1::timestamptz - interval '40 milliseconds', $1)`,
      [at],
    );
    await sql.unsafe(
      `insert into "${s}_qs".history (class, finalized_at, job_id, lease, state, queue, priority, kind, args,
                                      attempt, max_attempts, run_at, created_at, attempted_at)
       values ('failed', $1, 999999, 1, 'failed', 'q', 2, 'mixed', '{}', 1, 1, $1, $1,
               $1::timestamptz - interval '60 milliseconds')`,
      [at],
    );
    const rows = await readKindMinute(
      client.db,
      [`"${s}".canonical_finished_attempts`, qs.finishedAttemptsFn],
      new Date(m),
    );
    assert.deepEqual(
      rows.map((r) => [r.queue, r.kind, r.completed, r.failed, r.retried, Math.round(r.runP50Ms!)]),
      [["q", "mixed", 1, 1, 0, 50]],
    );
  } finally {
    await sql.end();
    await drop();
  }
});

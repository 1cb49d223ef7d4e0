/**
 * Claims depend on the jobs table's planner statistics: without any, PostgreSQL scanned and sorted the
 * whole backlog for every claim (73 ms per claim of 10 with 200,000 available jobs, 1 ms after
 * ANALYZE). The leader analyzes the table when its statistics are missing or far behind.
 */
import assert from "node:assert/strict";
import type postgres from "postgres";
import { engineTest, waitFor, withSchema } from "../helpers/db.ts";
import { FAST, startWorker } from "../helpers/worker.ts";

/** Changes since the last ANALYZE and whether there was one, once the counters show at least `min` changes. */
async function stats(
  sql: postgres.Sql,
  schema: string,
  min = 0,
): Promise<{ changed: number; analyzed: boolean }> {
  return (await waitFor(
    async () => {
      await sql.unsafe(`select pg_stat_clear_snapshot()`);
      const [r] = await sql.unsafe(
        `select n_mod_since_analyze::int as changed, last_analyze is not null as analyzed
         from pg_stat_user_tables where schemaname = $1 and relname = 'jobs'`,
        [schema],
      );
      return r && r.changed >= min ? { changed: Number(r.changed), analyzed: Boolean(r.analyzed) } : null;
    },
    15_000,
    `statistics counters of ${schema}.jobs`,
  ))!;
}

/** Inserts `n` jobs on `sql`'s own connection and flushes its statistics counters at once. */
async function insertJobs(sql: postgres.Sql, schema: string, n: number) {
  await sql.unsafe(`select pg_stat_force_next_flush()`);
  await sql.unsafe(`insert into "${schema}".jobs (kind) select 'k' from generate_series(1, ${n})`);
}

engineTest(
  "canonical",
  "refreshStatistics: analyzes a never-analyzed jobs table with a backlog, then not again until it is far behind",
  () =>
    withSchema(async (client, schema, sql) => {
      await insertJobs(sql, schema, 500);
      await stats(sql, schema, 500);
      assert.equal(
        await client.engine.refreshStatistics(),
        false,
        "500 changes: below the floor, nothing to do",
      );

      await insertJobs(sql, schema, 1500);
      await stats(sql, schema, 2000);
      assert.equal(await client.engine.refreshStatistics(), true, "never analyzed with 2,000 rows: analyze");
      const after = await stats(sql, schema);
      assert.equal(after.analyzed, true);
      assert.equal(after.changed, 0);
      const [{ reltuples }] = await sql.unsafe(
        `select reltuples::int from pg_class where oid = $1::regclass`,
        [
          `"${schema}".jobs`,
        ],
      );
      assert.equal(reltuples, 2000);

      // 2,000 more changes on a table analyzed at 2,000 rows: within max(10,000, 2 x 2,000), left to autovacuum.
      await insertJobs(sql, schema, 2000);
      await stats(sql, schema, 2000);
      assert.equal(await client.engine.refreshStatistics(), false);
    }, { fresh: true }),
);

engineTest(
  "canonical",
  "the leader's statistics duty analyzes a backlog enqueued into a fresh table, and claims then use the claim index",
  () =>
    withSchema(async (client, schema, sql) => {
      // Enqueued into a paused queue so that the worker claims nothing while we look at the plan.
      await client.pauseQueue("default", { create: true });
      await insertJobs(sql, schema, 5000);
      await stats(sql, schema, 5000);
      const { stop } = await startWorker(client, {
        ...FAST,
        queues: { default: { maxWorkers: 2 } },
        handlers: { k: () => {} },
      });
      try {
        await waitFor(
          async () => (await stats(sql, schema)).analyzed,
          15_000,
          "the leader to analyze the jobs table",
        );
      } finally {
        await stop();
      }
      const plan = await sql.unsafe(
        `explain select id from "${schema}".jobs where state = 'available' and queue = 'default'
        order by priority, run_at, id limit 10 for update skip locked`,
      );
      const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
      assert.match(text, /Index Scan using jobs_claim_idx/, text);
      assert.doesNotMatch(text, /Sort/, text);
    }, { fresh: true }),
);

engineTest(
  "canonical",
  "refreshStatistics never waits for the table lock (an autovacuum at work holds it): it gives up and tries again later",
  () =>
    withSchema(async (client, schema, sql) => {
      await insertJobs(sql, schema, 2000);
      await stats(sql, schema, 2000);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      // The lock an autovacuum (or a manual VACUUM/ANALYZE) takes.
      const holder = sql.begin(async (tx) => {
        await tx.unsafe(`lock table "${schema}".jobs in share update exclusive mode`);
        locked();
        await held;
      });
      await isLocked;
      try {
        const t0 = performance.now();
        assert.equal(await client.engine.refreshStatistics(), false, "gave up");
        // It waits lock_timeout (50 ms), well below deadlock_timeout (1 s), so no autovacuum would be
        // cancelled; the bound here is loose for a loaded machine, a waiter would hang until released.
        assert.ok(performance.now() - t0 < 5_000, "gave up without waiting for the lock");
        assert.equal((await stats(sql, schema)).analyzed, false);
      } finally {
        // Released also when an assertion failed: the schema's cleanup needs the lock.
        release();
        await holder;
      }
      assert.equal(await client.engine.refreshStatistics(), true, "analyzed once the lock is free");
      assert.equal((await stats(sql, schema)).analyzed, true);
    }, { sqlMax: 2, fresh: true }),
);

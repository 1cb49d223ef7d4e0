/**
 * The canonical engine keeps the planner statistics of its job tables fresh by itself
 * (docs/guide/operations.md, "Planner statistics"): on a throw-away cluster with autovacuum off and a
 * schema that was never analyzed, the leader analyzes the jobs table once 3,000 jobs arrived, and again
 * after 12,000 more. Canonical only: queue storage's statistics are part of its storage redesign.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { createClient } from "../../mod.ts";
import { TEST_ENGINE, waitFor } from "../helpers/db.ts";
import { startCluster } from "../helpers/pg_cluster.ts";
import { startWorker } from "../helpers/worker.ts";

Deno.test({
  name:
    "canonical: the leader analyzes a never-analyzed jobs table (autovacuum off), and again after a burst",
  ignore: TEST_ENGINE !== "canonical",
  fn: async () => {
    const pg = await startCluster({ settings: { autovacuum: "off" } });
    const client = createClient({ databaseUrl: pg.url, schema: "stats", maxConnections: 4 });
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    let w: Awaited<ReturnType<typeof startWorker>> | undefined;
    const stats = async () => {
      const [r] = await sql.unsafe(
        `select s.analyze_count::int + s.autoanalyze_count::int as analyzed, c.reltuples::float8 as reltuples
           from pg_stat_user_tables s join pg_class c on c.oid = s.relid
          where s.schemaname = 'stats' and s.relname = 'jobs'`,
      );
      return { analyzed: Number(r.analyzed), reltuples: Number(r.reltuples) };
    };
    try {
      await client.migrate({ engine: "canonical" });
      for (let i = 0; i < 3; i++) {
        await client.enqueueMany(Array.from({ length: 1000 }, (_, j) => ({ kind: "k", queue: `q${j % 5}` })));
      }
      const before = await stats();
      assert.equal(before.analyzed, 0, "never analyzed");
      assert.ok(before.reltuples <= 0, `no row estimate yet: ${before.reltuples}`);
      // The worker leads; its statistics duty runs every 5 s. It serves another queue: the jobs stay.
      w = await startWorker(client, { queues: { elsewhere: {} } });
      const first = (await waitFor(
        async () => {
          const s = await stats();
          return s.analyzed >= 1 ? s : null;
        },
        30_000,
        "the leader's ANALYZE",
      ))!;
      assert.ok(Math.abs(first.reltuples - 3000) < 100, `reltuples ${first.reltuples}`);
      // A burst beyond max(10,000, twice the rows counted) is analyzed again.
      for (let i = 0; i < 12; i++) {
        await client.enqueueMany(Array.from({ length: 1000 }, () => ({ kind: "k", queue: "q0" })));
      }
      const again = (await waitFor(
        async () => {
          const s = await stats();
          return s.analyzed > first.analyzed ? s : null;
        },
        30_000,
        "a second ANALYZE",
      ))!;
      assert.ok(Math.abs(again.reltuples - 15000) < 500, `reltuples ${again.reltuples}`);
    } finally {
      await w?.stop();
      await sql.end();
      await client.close();
      await pg.destroy();
    }
  },
});

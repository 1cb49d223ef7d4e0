/**
 * The HTTP path must reach callbacks by index: a statement that joins or semi-joins the callbacks
 * table on a set of ids was planned as a hash over a sequential scan of the whole table, which grows
 * by one row per attempt, so parks, claims and resolutions slowed down with every job. We count the
 * sequential scans PostgreSQL records on the callbacks table around each statement.
 */
import { claim } from "../helpers/claim.ts";
import assert from "node:assert/strict";
import { engineTest, waitFor, withSchema } from "../helpers/db.ts";

engineTest(
  "canonical",
  "claims with callbacks, batched parks and batched resolutions never scan the callbacks table",
  () =>
    // One connection, so that its statistics can be flushed on demand before each reading.
    withSchema(async (client, schema, sql) => {
      const seqScans = async () => {
        await client.sql.unsafe(`select pg_stat_force_next_flush()`);
        await client.sql.unsafe(`select 1`);
        return (await waitFor(
          async () => {
            await sql.unsafe(`select pg_stat_clear_snapshot()`);
            const [r] = await sql.unsafe(
              `select seq_scan::int as n from pg_stat_user_tables where schemaname = $1 and relname = 'callbacks'`,
              [schema],
            );
            return r ? { n: Number(r.n) } : null;
          },
          10_000,
          "callbacks statistics",
        ))!;
      };
      // 3,000 attempts with callbacks already in the table, as after a while of HTTP traffic.
      await client.enqueueMany(Array.from({ length: 3000 }, () => ({ kind: "fn" })));
      const old = await claim(client, "default", 3000, "rt", { fn: 60_000 }, { fn: 60_000 });
      assert.equal(old.length, 3000);
      await client.enqueueMany(Array.from({ length: 20 }, () => ({ kind: "fn" })));
      // The leader's statistics duty analyzes both tables once they have changed this much.
      await seqScans();
      assert.equal(await client.engine.refreshStatistics(), true);
      const before = (await seqScans()).n;

      const jobs = await claim(client, "default", 20, "rt", { fn: 60_000 }, { fn: 60_000 });
      assert.equal(jobs.length, 20);
      const parked = await Promise.all(
        jobs.map((j) => client.engine.park({ id: j.id, lease: j.lease, callbackId: j.callbackId! })),
      );
      assert.ok(parked.every(Boolean));
      const done = await Promise.all(
        jobs.map((j) => client.engine.resolveCallback(j.callbackId!, "complete", { payload: { ok: true } })),
      );
      assert.ok(done.every((r) => r.outcome === "ok" && r.state === "completed"));

      assert.equal((await seqScans()).n, before, "no sequential scan of callbacks");
    }, { maxConnections: 1 }),
);

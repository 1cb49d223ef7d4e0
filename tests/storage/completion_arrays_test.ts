/**
 * A batch of completions, as the worker's completer sends it: results and unique keys that hold what an array
 * literal must escape (quotes, backslashes, commas, braces, the word NULL) come back as they were; a stale
 * lease beside its job's current one completes nothing; an attempt the engine did not claim itself (another
 * process's, after a restart) completes through the closing path. Both engines.
 */
import assert from "node:assert/strict";
import { claim } from "../helpers/claim.ts";
import { engineTest, withSchema } from "../helpers/db.ts";
import type { Completion } from "../../src/storage/engine.ts";
import { createClient } from "../../src/client/client.ts";
import { DATABASE_URL } from "../helpers/db.ts";

const RESULTS: unknown[] = [
  { s: 'x"y\\z,{}', n: [1, "2"] },
  "NULL",
  null,
  ["{a,b}", '"', "\\"],
  { u: "é\u2028😀", empty: "" },
  0,
];
/** The jobs' unique keys (null: none). */
const KEYS = ['a"b', "c\\d,{e}", "NULL", "", null, "plain"];

Deno.test("completions in one batch: escaped results and unique keys, a stale lease, an attempt claimed elsewhere", () =>
  withSchema(async (client, schema, sql) => {
    // Through the SQL API, which takes a unique key as it is (the client's keys are made from kind and args).
    const enqueue = async (i: number, key: string | null) => {
      const item = {
        kind: "k",
        queue: "default",
        args: { i },
        priority: 2,
        max_attempts: 25,
        tags: [],
        metadata: {},
        ...(key === null ? {} : { unique_key: key }),
      };
      const [r] = await sql.unsafe(
        `select ids[1] as id, dups is not null as duplicate from "${schema}".enqueue_batch($1::text::json)`,
        [
          JSON.stringify([item]),
        ],
      );
      return { id: Number(r.id), duplicate: r.duplicate as boolean };
    };
    const enqueued = [];
    for (let i = 0; i < RESULTS.length; i++) enqueued.push(await enqueue(i, KEYS[i]));
    assert.ok(enqueued.every((e) => !e.duplicate));
    const claimed = await claim(client, "default", RESULTS.length, "rt-arrays");
    assert.equal(claimed.length, RESULTS.length);
    const byArg = new Map(claimed.map((j) => [(j.args as { i: number }).i, j]));
    const items: Completion[] = RESULTS.map((result, i) => ({
      id: byArg.get(i)!.id,
      lease: byArg.get(i)!.lease,
      result,
      resultJson: JSON.stringify(result),
      startedAt: new Date(Date.now() - 1000 * (i + 1)),
    }));
    // The last job's attempt is completed by a client of its own, whose engine did not claim it.
    const last = items.pop()!;
    const stale = { ...items[0], lease: items[0].lease + 1, result: "stale", resultJson: '"stale"' };
    const done = await client.engine.complete([...items, stale], { keepCompleted: true });
    assert.deepEqual(done.sort((a, b) => a - b), items.map((c) => c.id).sort((a, b) => a - b));
    const other = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 1 });
    try {
      assert.deepEqual(await other.engine.complete([last], { keepCompleted: true }), [last.id]);
    } finally {
      await other.close();
    }
    for (const [i, c] of [...items, last].entries()) {
      const job = await client.getJob(c.id);
      assert.equal(job?.state, "completed", `job ${i}`);
      assert.deepEqual(job?.result, RESULTS[i], `job ${i}'s result`);
    }
    // Each key was released with its job: the same key makes a new job now.
    for (const [i, key] of KEYS.entries()) {
      if (key === null) continue;
      const again = await enqueue(100 + i, key);
      assert.equal(again.duplicate, false, `key ${JSON.stringify(key)} was released`);
      assert.notEqual(again.id, enqueued[i].id, `key ${JSON.stringify(key)} was released`);
    }
  }));

engineTest(
  "queue_storage",
  "the JSON form of the completion, which earlier workers call, writes the same as the arrays",
  () =>
    withSchema(async (client, schema, sql) => {
      await client.enqueueMany([{ kind: "k", args: { n: 1 } }, { kind: "k", args: { n: 2 } }]);
      const rows = await sql.unsafe(
        `select job_id, lease, slot, claim_id from "${schema}_qs".claim('default', 2, 2, 'rt-json', '{}'::jsonb,
              '{}'::jsonb, 0)`,
      );
      assert.equal(rows.length, 2);
      const started = new Date(Date.now() - 5_000);
      const items = rows.map((r, i) => ({
        id: Number(r.job_id),
        lease: r.lease,
        slot: r.slot,
        claim: Number(r.claim_id),
        started_at: started.toISOString(),
        result: i === 0 ? { s: 'a"b\\c' } : null,
      }));
      const done = await sql.unsafe(
        `select "${schema}_qs".complete($1::text::jsonb, true) as id`,
        [
          JSON.stringify(items),
        ],
      );
      assert.deepEqual(done.map((r) => Number(r.id)).sort(), items.map((i) => i.id).sort());
      for (const it of items) {
        const job = await client.getJob(it.id);
        assert.equal(job?.state, "completed");
        assert.deepEqual(job?.result, it.result);
        assert.equal(job?.attemptedAt?.getTime(), started.getTime(), "the handler's start time is kept");
      }
    }),
);

/** Rows the plan read from the tables whose name starts with `prefix` (rows returned plus rows filtered out). */
function rowsRead(plan: Record<string, unknown>, prefix: string): number {
  const own =
    typeof plan["Relation Name"] === "string" && (plan["Relation Name"] as string).startsWith(prefix)
      ? Number(plan["Actual Rows"] ?? 0) * Number(plan["Actual Loops"] ?? 1) +
        Number(plan["Rows Removed by Filter"] ?? 0) + Number(plan["Rows Removed by Index Recheck"] ?? 0)
      : 0;
  const children = (plan["Plans"] as Record<string, unknown>[] | undefined) ?? [];
  return own + children.reduce((n, p) => n + rowsRead(p, prefix), 0);
}

engineTest(
  "queue_storage",
  "a completed job is read by id from its own claim's completion row, not by unnesting every completion of the ring",
  () =>
    withSchema(async (client, schema, sql) => {
      // 200 claims of one job, each completed in a statement of its own: 200 completion rows in the ring.
      await client.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ kind: "k", args: { i } })));
      let last = 0;
      for (let i = 0; i < 200; i++) {
        const [j] = await claim(client, "default", 1, "rt-lookup");
        await client.engine.complete([{ id: j.id, lease: j.lease, result: i, resultJson: String(i) }], {
          keepCompleted: true,
        });
        last = j.id;
      }
      const [n] = await sql.unsafe(`select count(*)::int as n from "${schema}_qs".completions`);
      assert.equal(n.n, 200);
      const job = await client.getJob(last);
      assert.equal(job?.state, "completed");
      assert.equal(job?.result, 199);
      // What get_job's lookup reads (row counts of the executed plan; no timing).
      const [{ "QUERY PLAN": [top] }] = await sql.unsafe(
        `explain (analyze, format json) select * from "${schema}_qs".jobs where id = $1 order by lease desc limit 1`,
        [last],
      );
      const read = rowsRead(top.Plan, "completions");
      assert.ok(read <= 3, `the lookup read ${read} completion rows of 200`);
    }),
);

engineTest(
  "queue_storage",
  "claim_next gives every column on every row, as workers of the previous release read it (by name, per row)",
  () =>
    withSchema(async (client, schema, sql) => {
      await client.enqueueMany([{ kind: "a" }, { kind: "b", args: { x: 1 }, tags: ["t"] }, { kind: "c" }]);
      const rows = await sql.unsafe(
        `select * from "${schema}_qs".claim_next('default', 3, 2, 'rt-old', '{}'::jsonb, '{}'::jsonb, 1000, '{}')`,
      );
      assert.equal(rows.length, 3);
      const at = rows[0].claimed_at as Date;
      assert.ok(at instanceof Date);
      for (const r of rows) {
        assert.equal(r.queue, "default");
        assert.equal(typeof r.shard, "number");
        assert.deepEqual(r.errors, []);
        assert.deepEqual(r.metadata, {});
        assert.equal((r.claimed_at as Date).getTime(), at.getTime(), "one claim time, on every row");
      }
      assert.deepEqual(rows.map((r) => r.tags), [[], ["t"], []]);
      assert.deepEqual(rows.map((r) => r.prefetched), [false, false, true]);
    }),
);

/**
 * The completion statement must find its rows by id however many jobs have run before it. Joined only
 * on its JSON input, PostgreSQL chose to read every `running` entry of the state index, and until
 * vacuum that index keeps a dead `running` entry for each job that ever ran: each completion got
 * slower with every job processed (a drain of 60,000 jobs spent most of its database time there).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { DATABASE_URL, engineTest, testClient } from "../helpers/db.ts";
import { completionSql } from "../../src/storage/canonical/complete.ts";
import { schemaNames } from "../../src/db/names.ts";

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

function nodes(p: PlanNode): PlanNode[] {
  return [p, ...(p.Plans ?? []).flatMap(nodes)];
}

for (const deleteRows of [false, true]) {
  engineTest(
    "canonical",
    `completion (${deleteRows ? "delete" : "update"}) probes the jobs by id after many jobs have run`,
    async () => {
      const { client, schema, drop } = await testClient({ schema: undefined });
      const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        await client.enqueueMany(Array.from({ length: 5000 }, () => ({ kind: "k" })));
        // 4,990 jobs ran and completed, leaving dead `running` entries behind; 10 are running now.
        await sql.unsafe(`update "${schema}".jobs set state = 'running', lease = 1`);
        await sql.unsafe(
          `update "${schema}".jobs set state = 'completed', finalized_at = now() where id <= (select min(id) + 4989 from "${schema}".jobs)`,
        );
        await sql.unsafe(`analyze "${schema}".jobs`);
        const running = await sql.unsafe(
          `select id from "${schema}".jobs where state = 'running' order by id limit 2`,
        );
        const ids = running.map((r) => Number(r.id));
        const json = JSON.stringify(ids.map((id) => ({ id, lease: 1, result: null })));
        const text = completionSql(schemaNames(schema), deleteRows);
        const [{ "QUERY PLAN": plan }] = await sql.unsafe(`explain (format json) ${text}`, [json, ids]);
        const scans = nodes(plan[0].Plan).filter((p) =>
          /Scan/.test(p["Node Type"]) && p["Index Name"]?.startsWith("jobs_")
        );
        assert.deepEqual(scans.length, 1, JSON.stringify(plan));
        assert.ok(
          /id = ANY/.test(scans[0]["Index Cond"] ?? ""),
          `jobs scan without an id probe: ${JSON.stringify(scans[0])}`,
        );
        assert.ok(!/Bitmap/.test(scans[0]["Node Type"]), `bitmap scan: ${JSON.stringify(scans[0])}`);
        // And it completes exactly those two.
        const done = await sql.unsafe(text, [json, ids]);
        assert.deepEqual(done.map((r) => Number(r.id)).sort(), ids.sort());
      } finally {
        await sql.end();
        await drop();
      }
    },
  );
}

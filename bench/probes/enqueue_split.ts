/**
 * Probe: where the time of a 1,000-job `enqueueMany` goes, per engine. Medians over 15 batches of the
 * input checks (normalizeEnqueue), the JSON text of the statement's input (enqueueJson), the SQL function's
 * own run time (EXPLAIN ANALYZE of the same call, rolled back), and the whole call.
 *
 *   deno run -A bench/probes/enqueue_split.ts
 */
import postgres from "postgres";
import { createClient } from "../../mod.ts";
import { normalizeEnqueue } from "../../src/client/enqueue_input.ts";
import { enqueueJson } from "../../src/storage/shared/enqueue.ts";

const BASE = "postgres://postgres@127.0.0.1:5432";
const DB = "bench_probe_enqueue_split";
const admin = postgres(`${BASE}/postgres`, { max: 1, onnotice: () => {} });
await admin.unsafe(`drop database if exists ${DB}`);
await admin.unsafe(`create database ${DB}`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const items = () => Array.from({ length: 1000 }, (_, i) => ({ kind: "bench_noop", args: { i } }));

try {
  for (const engine of ["queue_storage", "canonical"] as const) {
    const schema = engine === "canonical" ? "svc_c" : "svc";
    const client = createClient({ databaseUrl: `${BASE}/${DB}`, schema, maxConnections: 2 });
    await client.migrate({ engine });
    const sql = postgres(`${BASE}/${DB}`, { max: 1, onnotice: () => {} });
    await client.enqueueMany(items()); // warm up
    const t = {
      normalize: [] as number[],
      json: [] as number[],
      server: [] as number[],
      call: [] as number[],
    };
    for (let r = 0; r < 15; r++) {
      let t0 = performance.now();
      const normalized = items().map((i) => normalizeEnqueue(i));
      t.normalize.push(performance.now() - t0);
      t0 = performance.now();
      const text = enqueueJson(normalized);
      t.json.push(performance.now() - t0);
      await sql.begin(async (tx) => {
        const plan = await tx.unsafe(
          `explain (analyze, format json) select * from "${schema}".enqueue_batch($1::text::json)`,
          [text],
        );
        t.server.push(plan[0]["QUERY PLAN"][0]["Execution Time"]);
        await tx.unsafe("rollback");
      }).catch(() => {});
      t0 = performance.now();
      await client.enqueueMany(items());
      t.call.push(performance.now() - t0);
    }
    console.log(
      `${engine}: per 1,000 jobs, median ms: normalize ${median(t.normalize).toFixed(1)}, json ${
        median(t.json).toFixed(1)
      }, SQL function ${median(t.server).toFixed(1)}, whole enqueueMany ${median(t.call).toFixed(1)} (${
        (1000 / (median(t.call) / 1000)).toFixed(0)
      } jobs/s)`,
    );
    await sql.end();
    await client.close();
  }
} finally {
  await admin.unsafe(`drop database if exists ${DB} with (force)`);
  await admin.end();
}

/**
 * Probe: queue storage's claim statements, server time only (no round trip, no commit), A/B between two
 * databases built from two checkouts, interleaved so that the machine's drift hits both alike.
 *
 *   deno run -A bench/probes/claim_server.ts setup DB        # from this checkout: migrate, 120,000 jobs
 *   deno run -A bench/probes/claim_server.ts compare DB_A DB_B
 *
 * `compare` runs each statement in a loop inside a DO block in a transaction that is rolled back (so both
 * databases keep their jobs), five rounds alternating A and B, and prints each side's median µs per call.
 */
import postgres from "postgres";
import { createClient } from "../../mod.ts";

const BASE = "postgres://postgres@127.0.0.1:5432";
const [mode, A, B] = Deno.args;
if (mode === "setup" && A) {
  const admin = postgres(`${BASE}/postgres`, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${A}`);
  await admin.unsafe(`create database ${A}`);
  await admin.end();
  const client = createClient({ databaseUrl: `${BASE}/${A}`, maxConnections: 2 });
  await client.migrate();
  for (let i = 0; i < 120; i++) {
    await client.enqueueMany(Array.from({ length: 1000 }, () => ({ kind: "p", args: {} })));
  }
  await client.close();
} else if (mode === "compare" && A && B) {
  const claim = (n: number) =>
    `perform * from svc_qs.claim_next('default', ${n}, ${n}, 'w1', '{}'::jsonb, '{}'::jsonb, 0, '{}'::bigint[], '{}'::bigint[], '{}'::integer[])`;
  const candidates = (n: number) =>
    `perform * from svc_qs.claim_candidates(0::smallint, 'default', '{2}'::smallint[], ${n})`;
  const stmts: [string, string, number][] = [
    ["candidates(1)", candidates(1), 2000],
    ["candidates(500)", candidates(500), 100],
    ["claim_next(1)", claim(1), 1000],
    ["claim_next(500)", claim(500), 20],
  ];
  const sqls = [A, B].map((db) => postgres(`${BASE}/${db}`, { max: 1, onnotice: () => {} }));
  const res = new Map<string, number[]>();
  for (let round = 0; round < 5; round++) {
    for (const [name, stmt, n] of stmts) {
      for (const [i, sql] of sqls.entries()) {
        await sql.unsafe("begin");
        const t0 = performance.now();
        await sql.unsafe(`do $$ begin for i in 1..${n} loop ${stmt}; end loop; end $$`);
        const us = (performance.now() - t0) * 1000 / n;
        await sql.unsafe("rollback");
        const key = `${name} ${i ? "B" : "A"}`;
        res.set(key, [...(res.get(key) ?? []), us]);
      }
    }
  }
  for (const [k, v] of res) console.log(`${k}: median ${v.sort((x, y) => x - y)[2].toFixed(1)} µs per call`);
  await Promise.all(sqls.map((s) => s.end()));
} else {
  console.error("usage: claim_server.ts setup DB | compare DB_A DB_B");
  Deno.exit(2);
}

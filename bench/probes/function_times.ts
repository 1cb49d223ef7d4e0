/**
 * Probe: server time per call of svc's SQL functions during a drain (args: N C; env ENGINE, PREFETCH, DB).
 * Drains N no-op jobs at concurrency C in a throw-away database with `track_functions = 'pl'`, then prints,
 * from pg_stat_user_functions, each function's calls and its mean total and self time per call (ms), and the
 * drain's rate. Server time only: the round trip and the driver are not in it.
 */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
const N = Number(Deno.args[0] ?? 20000), C = Number(Deno.args[1] ?? 10);
const db = Deno.env.get("DB") ?? "bench_probe_fn";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe(`drop database if exists ${db}`);
await admin.unsafe(`create database ${db}`);
await admin.unsafe(`alter database ${db} set track_functions = 'pl'`);
const url = `postgres://postgres@127.0.0.1:5432/${db}`;
const client = createClient({ databaseUrl: url, maxConnections: C > 10 ? 20 : 10 });
await client.migrate({
  engine: (Deno.env.get("ENGINE") ?? "queue_storage") as "canonical" | "queue_storage",
});
for (let i = 0; i < N; i += 1000) {
  await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
}
let done = 0;
let resolve!: () => void;
const all = new Promise<void>((r) => resolve = r);
const t0 = performance.now();
const w = createWorker({
  client,
  queues: { default: { maxWorkers: C, prefetch: Number(Deno.env.get("PREFETCH") ?? 0) } },
  logger: silentLogger,
  handlers: { noop: () => null },
  on: { completed: () => ++done === N && resolve() },
});
await w.start();
await all;
const wall = (performance.now() - t0) / 1000;
await w.shutdown(1000);
await client.close();
// Backends flush their function statistics when they end.
await new Promise((r) => setTimeout(r, 1500));
const sql = postgres(url, { max: 1, onnotice: () => {} });
const rows = await sql.unsafe(
  `select schemaname || '.' || funcname as f, calls, total_time / calls as total_ms, self_time / calls as self_ms
     from pg_stat_user_functions where calls > 10 order by total_time desc limit 12`,
);
console.log(`drain ${N} c${C} prefetch ${Deno.env.get("PREFETCH") ?? 0}: ${(N / wall).toFixed(0)} jobs/s`);
for (const r of rows) {
  console.log(
    `  ${String(r.f).padEnd(36)} ${String(r.calls).padStart(6)} calls  total ${
      Number(r.total_ms).toFixed(3)
    } ms  self ${Number(r.self_ms).toFixed(3)} ms per call`,
  );
}
await sql.end();
await admin.unsafe(`drop database ${db}`);
await admin.end();

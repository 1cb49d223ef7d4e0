/** Probe: twelve sequential client.enqueue calls on a fresh client (20 ms apart) in a throw-away database bench_probe_cold; prints each call's milliseconds (the first opens the connection; the next show what planning costs a new connection) and the connections it opened. */
import { createClient } from "../../mod.ts";
import postgres from "postgres";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_cold");
await admin.unsafe("create database bench_probe_cold");
const url = "postgres://postgres@127.0.0.1:5432/bench_probe_cold";
{
  const c = createClient({ databaseUrl: url });
  await c.migrate();
  await c.close();
}
const client = createClient({ databaseUrl: url, maxConnections: 10 });
const out: string[] = [];
for (let i = 0; i < 12; i++) {
  const t0 = performance.now();
  await client.enqueue("p", {});
  out.push((performance.now() - t0).toFixed(2));
  await new Promise((r) => setTimeout(r, 20));
}
console.log("sequential enqueues, ms:", out.join(" "));
const [{ n }] = await admin.unsafe(
  `select count(*)::int as n from pg_stat_activity where datname = 'bench_probe_cold'`,
);
console.log("connections open:", n);
await client.close();
await admin.unsafe("drop database bench_probe_cold");
await admin.end();

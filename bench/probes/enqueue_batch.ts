/** Probe: enqueueMany of 20 batches of 1,000, three times. */
import { createClient } from "../../mod.ts";
import postgres from "postgres";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_enqueue");
await admin.unsafe("create database bench_probe_enqueue");
const client = createClient({
  databaseUrl: "postgres://postgres@127.0.0.1:5432/bench_probe_enqueue",
  maxConnections: 4,
});
await client.migrate();
const items = () => Array.from({ length: 1000 }, (_, i) => ({ kind: "bench_noop", args: { i } }));
await client.enqueueMany(items());
for (let r = 0; r < 3; r++) {
  const t = performance.now();
  for (let b = 0; b < 20; b++) await client.enqueueMany(items());
  console.log("client.enqueueMany", (20000 / ((performance.now() - t) / 1000)).toFixed(0), "jobs/s");
}
await client.close();
await admin.unsafe("drop database bench_probe_enqueue");
await admin.end();

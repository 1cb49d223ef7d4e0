/** Probe set-up for pgbench: database pb with svc migrated and N available jobs (arg N, default 100000). Then e.g. `pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 1 -t 1000 -f bench/probes/pgbench_claim.sql pb`. */
import { createClient } from "../../mod.ts";
import postgres from "postgres";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists pb");
await admin.unsafe("create database pb");
const client = createClient({ databaseUrl: "postgres://postgres@127.0.0.1:5432/pb" });
await client.migrate();
const N = Number(Deno.args[0] ?? 100000);
for (let i = 0; i < N; i += 1000) {
  await client.enqueueMany(Array.from({ length: 1000 }, () => ({ kind: "noop" })));
}
await client.close();
await admin.end();

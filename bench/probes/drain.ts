/** Probe: drain N no-op jobs at concurrency C (args: N C [0 = retention 0]; env CL = claimers) in a throw-away database bench_probe_drain. */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
const N = Number(Deno.args[0] ?? 20000), C = Number(Deno.args[1] ?? 10), RET = Deno.args[2] === "0";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_drain"); await admin.unsafe("create database bench_probe_drain");
const url = "postgres://postgres@127.0.0.1:5432/bench_probe_drain";
const client = createClient({ databaseUrl: url, maxConnections: C > 10 ? 20 : 10 });
await client.migrate();
for (let i = 0; i < N; i += 1000) await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
let done = 0; let t1 = 0; let resolve!: () => void; const all = new Promise<void>((r) => resolve = r);
const t0 = performance.now();
const w = createWorker({ client, queues: { default: { maxWorkers: C, claimers: Number(Deno.env.get('CL') ?? 1) } }, logger: silentLogger, retention: RET ? { completed: 0 } : undefined,
  handlers: { noop: () => null }, on: { completed: () => { if (++done === N) { t1 = performance.now(); resolve(); } } } });
await w.start();
await all;
console.log(`drain ${N} at concurrency ${C}${RET ? " ret0" : ""}: ${(N / ((t1 - t0) / 1000)).toFixed(0)} jobs/s`);
await w.shutdown(1000); await client.close();
await admin.unsafe("drop database bench_probe_drain"); await admin.end();

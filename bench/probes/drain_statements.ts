/** Probe: drain with the count and mean time of each engine call (args: N C; env CL, POOL). */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
const N = Number(Deno.args[0] ?? 20000), C = Number(Deno.args[1] ?? 10);
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_drain");
await admin.unsafe("create database bench_probe_drain");
const url = "postgres://postgres@127.0.0.1:5432/bench_probe_drain";
const client = createClient({ databaseUrl: url, maxConnections: Number(Deno.env.get("POOL") ?? 10) });
await client.migrate();
for (let i = 0; i < N; i += 1000) {
  await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
}
const stats: Record<string, { n: number; ms: number; items: number }> = {};
const eng = client.engine as any;
for (const m of ["claim", "complete", "heartbeat", "promote", "rescue", "expireCallbacks", "upsertRuntime"]) {
  const orig = eng[m].bind(eng);
  eng[m] = async (...a: any[]) => {
    const t = performance.now();
    const r = await orig(...a);
    const s = stats[m] ??= { n: 0, ms: 0, items: 0 };
    s.n++;
    s.ms += performance.now() - t;
    if (m === "claim") {
      (globalThis as any).series = [...((globalThis as any).series ?? []), performance.now() - t];
    }
    s.items += Array.isArray(r) ? r.length : (r?.jobs?.length ?? 0);
    return r;
  };
}
let done = 0;
let t1 = 0;
let resolve!: () => void;
const all = new Promise<void>((r) => resolve = r);
const t0 = performance.now();
const w = createWorker({
  client,
  queues: { default: { maxWorkers: C, claimers: Number(Deno.env.get("CL") ?? 1) } },
  logger: silentLogger,
  handlers: { noop: () => null },
  on: {
    completed: () => {
      if (++done === N) {
        t1 = performance.now();
        resolve();
      }
    },
  },
});
await w.start();
await all;
console.log(`drain ${N} at concurrency ${C}: ${(N / ((t1 - t0) / 1000)).toFixed(0)} jobs/s`);
for (const [k, s] of Object.entries(stats)) {
  console.log(k, s.n, "calls", (s.ms / s.n).toFixed(2), "ms avg", (s.items / s.n).toFixed(1), "items avg");
}
const ser = (globalThis as any).series as number[];
for (let i = 0; i < ser.length; i += Math.ceil(ser.length / 10)) {
  console.log(
    "calls",
    i,
    "avg",
    (ser.slice(i, i + 50).reduce((a, b) => a + b, 0) / 50).toFixed(2),
  );
}
await w.shutdown(1000);
await client.close();
await admin.unsafe("drop database bench_probe_drain");
await admin.end();

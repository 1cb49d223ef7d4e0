/**
 * Probe: what metrics cost on the drain. Drains N no-op jobs at concurrency C (args: N C ROUNDS, defaults
 * 20000 10 5) with `metrics: true` and `metrics: false` interleaved, ROUNDS times each, each drain in a fresh
 * database bench_probe_metrics; prints every drain (jobs/s and the process's CPU-seconds per 1,000 jobs) and
 * the medians of each setting.
 */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
import process from "node:process";

const N = Number(Deno.args[0] ?? 20000), C = Number(Deno.args[1] ?? 10), ROUNDS = Number(Deno.args[2] ?? 5);
const ADMIN = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres";
const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
const url = (() => {
  const u = new URL(ADMIN);
  u.pathname = "/bench_probe_metrics";
  return u.toString();
})();

async function drain(metrics: boolean): Promise<{ rate: number; cpu: number }> {
  await admin.unsafe("drop database if exists bench_probe_metrics with (force)");
  await admin.unsafe("create database bench_probe_metrics");
  const client = createClient({ databaseUrl: url, maxConnections: C > 10 ? 20 : 10, metrics });
  try {
    await client.migrate();
    for (let i = 0; i < N; i += 1000) {
      await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
    }
    let done = 0;
    let resolve!: () => void;
    const all = new Promise<void>((r) => resolve = r);
    const w = createWorker({
      client,
      metrics,
      logger: silentLogger,
      queues: { default: { maxWorkers: C } },
      handlers: {
        noop: () => {
          if (++done === N) resolve();
          return null;
        },
      },
    });
    await w.start();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await all;
    const wall = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    await w.shutdown(5_000);
    return { rate: N / wall, cpu: (c.user + c.system) / 1e6 / N * 1000 };
  } finally {
    await client.close();
    await admin.unsafe("drop database if exists bench_probe_metrics with (force)");
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out: Record<"on" | "off", { rate: number; cpu: number }[]> = { on: [], off: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const m of r % 2 ? [false, true] : [true, false]) {
    const x = await drain(m);
    out[m ? "on" : "off"].push(x);
    console.log(
      `round ${r + 1} metrics ${m ? "on " : "off"}: ${x.rate.toFixed(0)} jobs/s, ${
        x.cpu.toFixed(3)
      } CPU-s per 1,000 jobs`,
    );
  }
}
for (const k of ["on", "off"] as const) {
  console.log(
    `metrics ${k}: median ${median(out[k].map((x) => x.rate)).toFixed(0)} jobs/s, ${
      median(out[k].map((x) => x.cpu)).toFixed(3)
    } CPU-s per 1,000 jobs (worker process), ${ROUNDS} drains of ${N} at concurrency ${C}`,
  );
}
await admin.end();

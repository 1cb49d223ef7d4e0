/**
 * Probe: pickup latency of a worker through a transaction pooler. A real PgBouncer (transaction mode, Debian's
 * `pgbouncer`, tests/helpers/pgbouncer.ts) in front of BENCH_DATABASE_URL; three workers in turn, each at
 * concurrency 10 and idle for 0.5 s, then 100 jobs enqueued one by one 20 ms apart by a direct client (as in
 * the benchmark's pickup row); latency from just before the enqueue call to the handler's start. Workers: a
 * direct one; one whose databaseUrl is the pooled URL with the direct URL as listenUrl; one with only the
 * pooled URL (it polls, pollInterval 500 ms). Args: runs (default 3, interleaved). Prints one row per worker:
 * p50 and p95 in ms, median over the runs (min-max of the p50s).
 */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
import { startPgBouncer } from "../../tests/helpers/pgbouncer.ts";

const base = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres";
const runs = Number(Deno.args[0] ?? 3);
const dbName = `bench_pooler_pickup_${Deno.pid}`;
const admin = postgres(base, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${dbName}`);
const direct = Object.assign(new URL(base), { pathname: `/${dbName}` }).toString();
const bouncer = await startPgBouncer({ target: direct, poolSize: 20 });
const producer = createClient({ databaseUrl: direct, maxConnections: 2 });

type Mode = "direct" | "pooled + listenUrl" | "pooled only";
const modes: Mode[] = ["direct", "pooled + listenUrl", "pooled only"];

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function pickup(mode: Mode, queue: string): Promise<number[]> {
  const started = new Map<number, number>();
  const worker = createWorker({
    databaseUrl: mode === "direct" ? direct : bouncer.url,
    pooler: mode === "direct" ? "none" : "transaction",
    listenUrl: mode === "pooled + listenUrl" ? direct : undefined,
    queues: { [queue]: { maxWorkers: 10 } },
    maxConnections: 15,
    logger: silentLogger,
    metrics: false,
    tracing: false,
    handlers: { pickup: (job) => void started.set(job.id, performance.now()) },
  });
  await worker.start();
  try {
    await new Promise((r) => setTimeout(r, 500));
    const sent = new Map<number, number>();
    const t0 = performance.now();
    for (let i = 0; i < 100; i++) {
      const wait = t0 + i * 20 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const at = performance.now();
      const job = await producer.enqueue("pickup", {}, { queue });
      sent.set(job.id, at);
    }
    const until = Date.now() + 30_000;
    while ([...sent.keys()].some((id) => !started.has(id)) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    return [...sent].filter(([id]) => started.has(id)).map(([id, at]) => started.get(id)! - at);
  } finally {
    await worker.shutdown(2_000);
  }
}

try {
  await producer.migrate();
  const p50s = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  const p95s = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  for (let r = 0; r < runs; r++) {
    for (const [i, m] of modes.entries()) {
      const lat = await pickup(m, `q${r}_${i}`);
      p50s.get(m)!.push(pct(lat, 50));
      p95s.get(m)!.push(pct(lat, 95));
    }
  }
  const load = Deno.loadavg().map((x) => x.toFixed(1)).join(" ");
  console.log(
    `pickup through PgBouncer 1.18 (transaction mode): 100 jobs 20 ms apart, concurrency 10, ` +
      `${runs} runs, load average ${load}`,
  );
  console.log("| worker | pickup p50 ms (min-max) | p95 ms |");
  console.log("| --- | --- | --- |");
  for (const m of modes) {
    const a = p50s.get(m)!, b = p95s.get(m)!;
    console.log(
      `| ${m} | ${pct(a, 50).toFixed(1)} (${Math.min(...a).toFixed(1)}-${Math.max(...a).toFixed(1)}) | ${
        pct(b, 50).toFixed(1)
      } |`,
    );
  }
} finally {
  await producer.close();
  await bouncer.stop();
  await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  await admin.end();
}

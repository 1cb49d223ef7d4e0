/**
 * Probe: what a fleet-wide limit costs a drain (ADR 019). Drains N no-op jobs (default 20,000) at concurrency
 * 10 and 50 with one worker, on each engine, without a limit, with a rate limit that never binds (its
 * bookkeeping only: the window read and a log row per claim), and with a concurrency limit equal to the
 * worker's slots (every claim counts the queue's open attempts; the limit binds whenever the slots are
 * full). R runs (default 3) interleaved; prints the median jobs/s of each and its ratio to the unlimited
 * drain of the same engine and concurrency. ENGINES (comma-separated) picks the engines (default both);
 * VARIANTS the variants (default none,rate,concurrency; also per_key: a per-key limit of 1 over 100 keys given
 * in turn; per_key_random: the same with keys drawn at random, seeded).
 * Throw-away database bench_probe_limits.
 *
 *   deno run -A bench/probes/limits.ts [N] [R]
 */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";

const N = Number(Deno.args[0] ?? 20_000), R = Number(Deno.args[1] ?? 3);
const BASE = "postgres://postgres@127.0.0.1:5432";
const DB = "bench_probe_limits";
const admin = postgres(`${BASE}/postgres`, { max: 1, onnotice: () => {} });
await admin.unsafe(`drop database if exists ${DB}`);
await admin.unsafe(`create database ${DB}`);
const url = `${BASE}/${DB}`;

type Variant = "none" | "rate" | "concurrency" | "per_key" | "per_key_random";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function drain(
  engine: "queue_storage" | "canonical",
  c: number,
  variant: Variant,
  run: number,
): Promise<number> {
  const schema = `lim_${engine === "canonical" ? "c" : "q"}_${c}_${variant}_${run}`;
  let seed = 42; // the keys drawn at random are the same in every run
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const client = createClient({ databaseUrl: url, schema, maxConnections: c > 10 ? 20 : 10 });
  try {
    await client.migrate({ engine });
    for (let i = 0; i < N; i += 1000) {
      await client.enqueueMany(
        Array.from({ length: Math.min(1000, N - i) }, (_, j) => ({
          kind: "noop",
          ...(variant === "per_key" ? { limitKey: `k${(i + j) % 100}` } : {}),
          ...(variant === "per_key_random" ? { limitKey: `k${Math.floor(random() * 100)}` } : {}),
        })),
      );
    }
    if (variant === "rate") {
      await client.setQueueLimit("default", { rate: 2_000_000_000, per: 1000 });
      await client.sql.unsafe(
        `update "${schema}".queue_limits set rate_logged_since = now() - interval '1 hour' where queue = 'default'`,
      );
    } else if (variant === "concurrency") {
      await client.setQueueLimit("default", { concurrency: c });
    } else if (variant === "per_key" || variant === "per_key_random") {
      await client.setQueueLimit("default", { perKey: { concurrency: 1 } });
    }
    let done = 0;
    let resolve!: () => void;
    const all = new Promise<void>((r) => resolve = r);
    const t0 = performance.now();
    let t1 = 0;
    const w = createWorker({
      client,
      queues: { default: { maxWorkers: c } },
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
    await w.shutdown(1000);
    return N / ((t1 - t0) / 1000);
  } finally {
    await client.close();
    await admin.unsafe(
      `drop schema if exists "${schema}" cascade; drop schema if exists "${schema}_qs" cascade`,
    );
  }
}

const cases: ["queue_storage" | "canonical", number, Variant][] = [];
const engines = (Deno.env.get("ENGINES") ?? "queue_storage,canonical").split(",") as (
  | "queue_storage"
  | "canonical"
)[];
for (const engine of engines) {
  for (const c of [10, 50]) {
    for (const v of (Deno.env.get("VARIANTS") ?? "none,rate,concurrency").split(",") as Variant[]) {
      cases.push([engine, c, v]);
    }
  }
}
const results = new Map<string, number[]>();
for (let run = 0; run < R; run++) {
  for (const [engine, c, v] of cases) {
    const rate = await drain(engine, c, v, run);
    const key = `${engine} c${c} ${v}`;
    results.set(key, [...(results.get(key) ?? []), rate]);
    console.log(`[run ${run + 1}] ${key}: ${rate.toFixed(0)} jobs/s`);
  }
}
console.log(`\ndrain of ${N.toLocaleString("en")} no-op jobs, one worker, median of ${R} runs:`);
for (const [engine, c, v] of cases) {
  const m = median(results.get(`${engine} c${c} ${v}`)!);
  const base = median(results.get(`${engine} c${c} none`)!);
  console.log(
    `  ${engine.padEnd(13)} c${String(c).padEnd(3)} ${v.padEnd(12)} ${m.toFixed(0).padStart(6)} jobs/s  ${
      (m / base).toFixed(2)
    }x the unlimited drain`,
  );
}
await admin.unsafe(`drop database ${DB}`);
await admin.end();

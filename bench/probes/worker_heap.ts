/**
 * Probe: the worker's heap over many jobs of mixed outcomes. Args: N (default 200,000) and the first
 * reading's count (default 20,000); env ENGINE (queue_storage or canonical). In a throw-away database
 * bench_probe_heap, one worker (maxWorkers 20) runs, in batches of 1,000: completed jobs, jobs that fail
 * and are retried (then fail for good), snoozed jobs, jobs cancelled while they run, and HTTP jobs parked
 * at a local function server (202) and completed by callback, in proportions 10:2:2:1:5. After the first
 * reading's count and at the end, with the worker idle, it forces a GC (run with --v8-flags=--expose-gc)
 * and prints the heap used, and the engine's per-attempt map size (which must be 0 when idle).
 *
 *   deno run -A --v8-flags=--expose-gc --config deno.contrib.json bench/probes/worker_heap.ts 200000 20000
 */
import { createClient, createWorker, silentLogger, snooze } from "../../mod.ts";
import type { StorageEngine } from "../../src/storage/engine.ts";
import postgres from "postgres";

const N = Number(Deno.args[0] ?? 200_000);
const FIRST = Number(Deno.args[1] ?? 20_000);
const engineName = (Deno.env.get("ENGINE") ?? "queue_storage") as "canonical" | "queue_storage";
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --v8-flags=--expose-gc");

const base = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres";
const db = `bench_probe_heap_${Deno.pid}`;
const admin = postgres(base, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${db}`);
const url = Object.assign(new URL(base), { pathname: `/${db}` }).toString();
const client = createClient({ databaseUrl: url, maxConnections: 10 });
await client.migrate({ engine: engineName });

// The function server: answers 202, then completes the job by its callback (the client's SQL path).
const fn = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
  const body = await req.json();
  setTimeout(() => client.completeExternal(body.callback_id, { ok: true }).catch(() => {}), 5);
  return new Response(null, { status: 202 });
});

const snoozed = new Set<number>();
const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 20 } },
  logger: silentLogger,
  pollInterval: 100,
  metrics: true,
  handlers: {
    ok: () => ({ ok: 1 }),
    flaky: { maxAttempts: 2, backoff: () => 10, handler: () => Promise.reject(new Error("flaky")) },
    nap: (job) => {
      if (snoozed.delete(job.id)) return "woke";
      snoozed.add(job.id);
      return snooze(10);
    },
    // Cancelled while it runs: it asks for its own cancel and returns when the signal aborts.
    hang: (job, ctx) =>
      new Promise<void>((resolve) => {
        ctx.signal.addEventListener("abort", () => resolve());
        client.cancel(job.id).catch(() => resolve());
      }),
  },
  httpWorkers: {
    fn: { url: `http://127.0.0.1:${fn.addr.port}/fn`, mode: "async", callbackBaseUrl: "http://127.0.0.1:9" },
  },
});
await worker.start();

// env MIX ("ok=10,fn=5"): another mix, to see what each kind costs.
const MIX: [string, number][] = Deno.env.get("MIX")
  ? Deno.env.get("MIX")!.split(",").map((p) => p.split("=")).map(([k, n]) => [k, Number(n)])
  : [["ok", 10], ["flaky", 2], ["nap", 2], ["hang", 1], ["fn", 5]];
const per = MIX.reduce((n, [, k]) => n + k, 0);
let enqueued = 0;

/**
 * Jobs not finished yet. On queue storage from the ring's own tallies (each life of a job is a ready row that
 * ends with a completion, a closed row or a skipped row; scheduled, retryable and parked jobs are rows of
 * their own), as the benchmark counts them: the views expand every retained job, and polling them made the
 * probe slower than its subject.
 */
async function unfinished(): Promise<number> {
  const [r] = engineName === "queue_storage"
    ? await client.sql.unsafe(
      `select (select count(*) from svc_qs.ready)
              - (select coalesce(sum(cardinality(ids)), 0) from svc_qs.completions)
              - (select count(*) from svc_qs.closed) - (select count(*) from svc_qs.skipped)
              + (select count(*) from svc_qs.deferred) + (select count(*) from svc_qs.parked) as n`,
    )
    : await client.sql.unsafe(
      `select count(*) as n from ${client.names.q}.jobs where state in
         ('scheduled', 'available', 'running', 'waiting_external', 'retryable')`,
    );
  return Number(r.n);
}

/** Runs `n` more jobs of the mix; returns when all are done. */
async function runJobs(n: number): Promise<void> {
  for (let done = 0; done < n; done += 1_000) {
    const batch = Array.from({ length: Math.min(1_000, n - done) }, (_, i) => {
      let k = i % per;
      for (const [kind, share] of MIX) {
        if (k < share) return { kind };
        k -= share;
      }
      return { kind: "ok" };
    });
    const jobs = await client.enqueueMany(batch);
    enqueued += jobs.length;
    while ((await unfinished()) > 3_000) await new Promise((r) => setTimeout(r, 50));
  }
  while ((await unfinished()) > 0) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 500)); // the last completions and parks flush
}

function reading(label: string): { heapMb: number; tracked: number } {
  for (let i = 0; i < 3; i++) gc!();
  const heapMb = Deno.memoryUsage().heapUsed / 1_048_576;
  const tracked = (client.engine as StorageEngine).trackedAttempts?.() ?? -1;
  console.log(
    `${label}: ${enqueued} jobs, heap used ${heapMb.toFixed(1)} MB, per-attempt map entries ${tracked}`,
  );
  return { heapMb, tracked };
}

const t0 = performance.now();
await runJobs(FIRST);
const first = reading("after the first jobs");
await runJobs(N - FIRST);
const last = reading("at the end");
console.log(
  `worker heap (${engineName}): +${(last.heapMb - first.heapMb).toFixed(1)} MB from ${FIRST} to ${N} jobs ` +
    `(${(((last.heapMb - first.heapMb) * 1_048_576) / Math.max(1, N - FIRST)).toFixed(1)} bytes/job), ` +
    `${((performance.now() - t0) / 1000).toFixed(0)} s, load average ${
      Deno.loadavg().map((x) => x.toFixed(1)).join(" ")
    }`,
);
// For bench/heap.ts (`deno task bench --heap`), one line it reads.
console.log(
  `HEAP_RESULT ${
    JSON.stringify({
      engine: engineName,
      jobs: N,
      first: FIRST,
      heapFirstMb: first.heapMb,
      heapLastMb: last.heapMb,
      trackedFirst: first.tracked,
      trackedLast: last.tracked,
      seconds: (performance.now() - t0) / 1000,
    })
  }`,
);
await worker.shutdown(5_000);
await fn.shutdown();
await client.close();
await admin.unsafe(`drop database ${db} with (force)`);
await admin.end();

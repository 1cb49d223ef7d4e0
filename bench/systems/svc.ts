/**
 * svc adapter, written against the public API (mod.ts): `createClient` / `createWorker`,
 * `enqueue` for single jobs, `enqueueMany` (one round trip) for batches, a worker with
 * `queues: { default: { maxWorkers, claimers } }` and a no-op handler. `retentionZero` sets
 * `retention: { completed: 0 }` (graphile-worker deletes completed jobs; the default keeps them 24 h).
 *
 * mod.ts is imported lazily: when it is missing, or lacks createClient/createWorker, `load()`
 * throws and the harness skips svc with the reason.
 */
import {
  BaseSystem,
  type BenchPayload,
  type HttpRoundTripResult,
  type JobHandler,
  type Variant,
  withTimeout,
} from "./base.ts";
import { now, sleep } from "../lib.ts";
import process from "node:process";

const KIND = "bench_noop";
const HTTP_KIND = "bench_http";
const CALLBACK_PREFIX = "/api/callbacks";
const UNFINISHED = ["scheduled", "available", "running", "waiting_external", "retryable"];
const silent = {
  debug() {},
  info() {},
  warn() {},
  error(...a: unknown[]) {
    console.error("  svc:", ...a);
  },
};

let svc: any = null;

/** Uses an already imported mod.ts (the bundle for Node imports it statically). */
export function useModule(mod: any): void {
  svc = mod;
}

/** Imports mod.ts; throws with a clear message when svc's core library is not there yet. */
export async function load(): Promise<any> {
  if (svc) return svc;
  const url = new URL("../../mod.ts", import.meta.url).href;
  let mod: any;
  try {
    mod = await import(url);
  } catch (e) {
    throw new Error(`cannot import mod.ts: ${(e as Error).message.split("\n")[0]}`);
  }
  for (const name of ["createClient", "createWorker"]) {
    if (typeof mod[name] !== "function") throw new Error(`mod.ts does not export ${name} yet`);
  }
  svc = mod;
  return mod;
}

function claimers(): number | undefined {
  const v = process.env.BENCH_SVC_CLAIMERS;
  return v ? Number(v) : undefined;
}

export default class SvcSystem extends BaseSystem {
  readonly name: string = "svc";
  readonly label: string = "svc";
  /** The storage engine of the run's database (the default: queue storage). */
  readonly engine: "queue_storage" | "canonical" = "queue_storage";
  readonly schemas = ["svc", "svc_qs"];
  /** Jobs a queue may hold beyond its free slots (the worker's `prefetch`; 0, its default, is off). */
  readonly prefetch: number = 0;
  private client: any = null;
  private worker: any = null;
  /** Jobs enqueued so far (the per-key variants' key of job i). */
  private enqueued = 0;
  /** The per-key variants' keys at random: a seeded generator (mulberry32), the same in every run. */
  private seed = 0x5eed;
  private random(): number {
    let t = (this.seed += 0x6d2b79f5);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  constructor(readonly variant: Variant = {}) {
    super();
  }

  /** The queue's options at a concurrency. */
  private queueConfig(concurrency: number): Record<string, number> {
    const c = claimers();
    return {
      maxWorkers: concurrency,
      ...(c ? { claimers: c } : {}),
      ...(this.prefetch ? { prefetch: this.prefetch } : {}),
    };
  }

  describe(concurrency: number, poolSize: number): string {
    const q = Object.entries(this.queueConfig(concurrency)).map(([k, v]) => `${k}: ${v}`).join(", ");
    return `svc (this repo, storage engine ${this.engine}): createClient({ maxConnections: ${poolSize} }), ` +
      `createWorker({ client, queues: { default: { ${q} } }, handlers: { ${KIND} } }) ` +
      `with default timings; client.enqueue() for single enqueue, client.enqueueMany() for batches`;
  }

  protected async install(): Promise<void> {
    const mod = await load();
    this.client = mod.createClient({ databaseUrl: this.url, maxConnections: this.opts.poolSize });
    await this.client.migrate({ engine: this.engine });
  }

  protected async uninstall(): Promise<void> {
    if (this.worker) await this.stopWorkers();
    await this.client?.close();
    this.client = null;
  }

  protected async enqueueOne(payload: BenchPayload): Promise<void> {
    await this.client.enqueue(KIND, payload);
  }

  protected async enqueueMany(payloads: BenchPayload[]): Promise<void> {
    const keyed = this.variant.limit === "per_key_turn" || this.variant.limit === "per_key_random";
    await this.client.enqueueMany(payloads.map((args) => {
      const i = this.enqueued++;
      if (!keyed) return { kind: KIND, args };
      const k = this.variant.limit === "per_key_turn" ? i % 100 : Math.floor(this.random() * 100);
      return { kind: KIND, args, limitKey: `k${k}` };
    }));
  }

  private workerOptions(extra: Record<string, unknown>): Record<string, unknown> {
    const opts: Record<string, unknown> = { client: this.client, logger: silent, ...extra };
    if (this.opts.retentionZero) opts.retention = { completed: 0 };
    return opts;
  }

  protected async startWorkers(concurrency: number, onJob: JobHandler): Promise<void> {
    if (this.variant.limit) {
      await this.client.setQueueLimit(
        "default",
        this.variant.limit === "concurrency" ? { concurrency } : { perKey: { concurrency: 1 } },
      );
    }
    this.worker = svc.createWorker(this.workerOptions({
      queues: { default: this.queueConfig(concurrency) },
      handlers: {
        [KIND]: async (job: any) => {
          onJob(job.args as BenchPayload);
          await Promise.resolve();
          return null;
        },
      },
    }));
    await this.worker.start();
  }

  protected async stopWorkers(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.shutdown(10_000);
  }

  /**
   * Counted on the harness's own connection, as for the peers (not through svc's pool, whose statements
   * would count as svc's work). On queue storage each life of a job is one ready row, and it ends with one
   * closure (a job id in a completions row, or a closed row) or a skipped row: the difference, plus
   * deferred and parked jobs, is what is unfinished.
   */
  protected async unfinished(): Promise<number> {
    if (this.engine === "queue_storage") {
      const [{ n }] = await this.sql`
        select ((select count(*) from svc_qs.ready)
                - (select coalesce(sum(cardinality(ids)), 0) from svc_qs.completions)
                - (select count(*) from svc_qs.closed) - (select count(*) from svc_qs.skipped)
                + (select count(*) from svc_qs.deferred) + (select count(*) from svc_qs.parked))::int as n`;
      return n;
    }
    const [{ n }] = await this
      .sql`select count(*)::int as n from svc.jobs where state::text = any(${UNFINISHED})`;
    return n;
  }

  /**
   * Row 4: HTTP worker in async mode. A local function server answers 202 at once and then POSTs
   * `complete` to the callback URL it was given; the callback receiver is svc's own
   * createCallbackRouter (unsigned) on another local port. Throughput: n jobs queued with
   * enqueueMany, from worker ready to the last `complete` answered 200. Latency: `latencyCount`
   * jobs enqueued `gapMs` apart, enqueue call to the `complete` callback's 200 answer.
   */
  async httpRoundTrip(n: number, latencyCount: number, gapMs: number): Promise<HttpRoundTripResult> {
    if (typeof svc.createCallbackRouter !== "function") {
      throw new Error("mod.ts does not export createCallbackRouter yet");
    }
    const router = svc.createCallbackRouter(this.client, {
      pathPrefix: CALLBACK_PREFIX,
      auth: { kind: "unsigned" },
    });
    const ac = new AbortController();
    const receiver = Deno.serve(
      { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
      (req: Request) => router.fetch(req),
    );
    let onDone: (args: BenchPayload) => void = () => {};
    let errors = 0;
    let firstPost = 0;
    const fn = Deno.serve(
      { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
      async (req) => {
        if (firstPost === 0) firstPost = now();
        const body = await req.json();
        setTimeout(async () => {
          try {
            const res = await fetch(body.callback_url, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ payload: { ok: true } }),
            });
            const out = await res.json().catch(() => null);
            if (res.status === 200 && out?.state === "completed") onDone(body.args as BenchPayload);
            else errors++;
          } catch {
            errors++;
          }
        }, 0);
        return new Response(null, { status: 202 });
      },
    );
    const base = (s: Deno.HttpServer<Deno.NetAddr>) => `http://127.0.0.1:${s.addr.port}`;
    const start = async () => {
      this.worker = svc.createWorker(this.workerOptions({
        queues: { default: { maxWorkers: 50 } },
        handlers: {},
        httpWorkers: {
          [HTTP_KIND]: {
            url: base(fn) + "/fn",
            mode: "async",
            callbackBaseUrl: base(receiver),
            callbackPathPrefix: CALLBACK_PREFIX,
            callbackTimeout: 600_000,
          },
        },
      }));
      await this.worker.start();
    };
    try {
      // Throughput.
      await this.client.enqueueMany(Array.from({ length: n }, () => ({ kind: HTTP_KIND, args: { t: 0 } })));
      let done = 0;
      let resolveAll!: () => void;
      const all = new Promise<void>((r) => (resolveAll = r));
      onDone = () => {
        if (++done === n) resolveAll();
      };
      await start();
      const tReady = now();
      await withTimeout(
        all,
        60_000 + n * 5,
        () => `http: ${done} of ${n} completed (${errors} callback errors)`,
      );
      while ((await this.unfinished()) > 0) await sleep(2);
      const t0 = firstPost > 0 ? Math.min(firstPost, tReady) : tReady;
      const jobsPerSec = n / ((now() - t0) / 1000);
      // Latency, same worker, idle first.
      await sleep(500);
      const latencies: number[] = [];
      let resolveLat!: () => void;
      const allLat = new Promise<void>((r) => (resolveLat = r));
      onDone = (p) => {
        if (p.t > 0) latencies.push(now() - p.t);
        if (latencies.length === latencyCount) resolveLat();
      };
      const s0 = now();
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < latencyCount; i++) {
        const wait = s0 + i * gapMs - now();
        if (wait > 0) await sleep(wait);
        pending.push(this.client.enqueue(HTTP_KIND, { t: now() }));
      }
      await Promise.all(pending);
      await withTimeout(allLat, 30_000, () => `http latency: ${latencies.length} of ${latencyCount}`);
      return { jobsPerSec, latencies };
    } finally {
      await this.stopWorkers();
      ac.abort();
      await Promise.allSettled([receiver.finished, fn.finished]);
    }
  }
}

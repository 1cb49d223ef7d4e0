/**
 * The adapter interface every benchmarked system implements, and the shared measuring logic.
 *
 * A system supplies a few primitives (enqueue one, enqueue many, start and stop workers with a
 * no-op handler, count unfinished jobs); the operations the harness measures (sequential and
 * batch enqueue, drain, pickup latency) are built on them here, once, so every system is timed by
 * the same code.
 */
import process from "node:process";
import { backendCpu, backendCpuDelta, harnessSql, now, percentile, sleep, type Sql } from "../lib.ts";

/** What the handler receives: `t` is the enqueue timestamp (performance.now()) or 0. */
export interface BenchPayload {
  t: number;
}

/** A system's configuration: tuned for speed (the default) or the system's own defaults. */
export interface Variant {
  /** The system's defaults except concurrency. */
  defaults?: boolean;
  /**
   * svc only, a fleet-wide limit on the drained queue: `concurrency` equal to the worker's slots, or a
   * per-key limit of 1 over 100 keys given in turn (job i has key i mod 100) or drawn at random (seeded).
   */
  limit?: LimitVariant;
}

/** The fleet-wide limits the benchmark drains under (svc on queue storage). */
export const LIMIT_VARIANTS = ["concurrency", "per_key_turn", "per_key_random"] as const;
export type LimitVariant = typeof LIMIT_VARIANTS[number];

export interface SetupOptions {
  /** Size of the system's connection pool (the same figure for every system). */
  poolSize: number;
  /** svc only: completed-job retention 0 (graphile-worker deletes completed jobs). */
  retentionZero?: boolean;
}

export interface DrainResult {
  jobsPerSec: number;
  /** Jobs measured: all n, or those a windowed drain finished within its window. */
  jobs: number;
  /** CPU-seconds (user + system) of this process, worker start to the last job finished. */
  workerCpuS: number;
  /** CPU-seconds of the PostgreSQL backends serving the database over the same window. */
  dbCpuS: number;
  /** Worker start call to start() resolved, ms. */
  startupMs: number;
  /** Handler count reached n to all jobs finished in the database, ms. */
  settleMs: number;
}

export interface HttpRoundTripResult {
  jobsPerSec: number;
  latencies: number[];
}

export interface BenchSystem {
  /** Key used on the command line and in metric names. */
  readonly name: string;
  /** Human label for the table. */
  readonly label: string;
  /** Schemas whose tables count as the system's job tables (dead tuples). */
  readonly schemas: string[];
  /** How the system is configured, for the results file. */
  describe(concurrency: number, poolSize: number): string;
  setup(dbUrl: string, opts: SetupOptions): Promise<void>;
  teardown(): Promise<void>;
  /** n single enqueues, each awaited before the next; jobs/s. */
  enqueueSequential(n: number): Promise<number>;
  /** n jobs in batches of batchSize, batches awaited one after another; jobs/s. */
  enqueueBatch(n: number, batchSize: number): Promise<number>;
  /** Starts workers on n queued jobs and returns once every one of them is finished in the database. */
  drain(n: number, concurrency: number): Promise<DrainResult>;
  /**
   * Starts workers on n queued jobs and measures until all n reached the handler or `windowMs` passed,
   * whichever comes first (for configurations that would take hours to drain a large backlog).
   */
  drainWindow(n: number, concurrency: number, windowMs: number): Promise<DrainResult>;
  /** Workers idle for `idleMs`; `count` jobs enqueued `gapMs` apart; enqueue-to-handler-start samples in ms. */
  pickupLatency(count: number, gapMs: number, concurrency: number, idleMs?: number): Promise<number[]>;
  /** svc only: HTTP worker round trip through a local function server. */
  httpRoundTrip?(n: number, latencyCount: number, gapMs: number): Promise<HttpRoundTripResult>;
}

export type JobHandler = (payload: BenchPayload) => void;

/** Pool sizes used for a given concurrency, identical across systems. */
export function poolSizeFor(concurrency: number): number {
  return concurrency <= 10 ? 10 : 20;
}

export abstract class BaseSystem implements BenchSystem {
  abstract readonly name: string;
  abstract readonly label: string;
  abstract readonly schemas: string[];
  abstract describe(concurrency: number, poolSize: number): string;

  protected url = "";
  protected opts: SetupOptions = { poolSize: 10 };
  /** The harness's own connection to the bench database (counting unfinished jobs). */
  protected sql!: Sql;

  // Primitives each system provides.
  protected abstract install(): Promise<void>;
  protected abstract uninstall(): Promise<void>;
  protected abstract enqueueOne(payload: BenchPayload): Promise<void>;
  protected abstract enqueueMany(payloads: BenchPayload[]): Promise<void>;
  protected abstract startWorkers(concurrency: number, onJob: JobHandler): Promise<void>;
  protected abstract stopWorkers(): Promise<void>;
  /** Jobs not yet finished (queued, locked or running), counted in SQL by the harness. */
  protected abstract unfinished(): Promise<number>;

  async setup(dbUrl: string, opts: SetupOptions): Promise<void> {
    this.url = dbUrl;
    this.opts = opts;
    this.sql = harnessSql(dbUrl);
    await this.install();
  }

  async teardown(): Promise<void> {
    try {
      await this.uninstall();
    } finally {
      await this.sql?.end({ timeout: 5 });
    }
  }

  async enqueueSequential(n: number): Promise<number> {
    const t0 = now();
    for (let i = 0; i < n; i++) await this.enqueueOne({ t: 0 });
    return n / ((now() - t0) / 1000);
  }

  async enqueueBatch(n: number, batchSize: number): Promise<number> {
    const t0 = now();
    for (let done = 0; done < n; done += batchSize) {
      const k = Math.min(batchSize, n - done);
      await this.enqueueMany(Array.from({ length: k }, () => ({ t: 0 })));
    }
    return n / ((now() - t0) / 1000);
  }

  async drain(n: number, concurrency: number): Promise<DrainResult> {
    return await this.measureDrain(n, concurrency, Infinity);
  }

  async drainWindow(n: number, concurrency: number, windowMs: number): Promise<DrainResult> {
    return await this.measureDrain(n, concurrency, windowMs);
  }

  private async measureDrain(n: number, concurrency: number, windowMs: number): Promise<DrainResult> {
    let seen = 0;
    let first = 0;
    let resolveAll!: () => void;
    const allSeen = new Promise<void>((r) => (resolveAll = r));
    const onJob: JobHandler = () => {
      if (seen === 0) first = now();
      if (++seen === n) resolveAll();
    };
    const tStart = now();
    await this.startWorkers(concurrency, onJob);
    const tReady = now();
    // CPU is counted from here: a worker's start-up (connections, election, ...) is not a cost per job.
    const cpu0 = process.cpuUsage();
    const db0 = await backendCpu(this.sql);
    let windowTimer: ReturnType<typeof setTimeout> | undefined;
    const window = Number.isFinite(windowMs)
      ? new Promise<void>((r) => (windowTimer = setTimeout(r, windowMs)))
      : new Promise<void>(() => {});
    try {
      await withTimeout(
        Promise.race([allSeen, window]),
        60_000 + n * 2,
        () => `drain: only ${seen} of ${n} jobs reached the handler`,
      );
    } finally {
      clearTimeout(windowTimer);
    }
    const tSeen = now();
    const jobs = seen;
    // Every handler ran (a full drain): the drain ends when the database agrees they are done.
    if (jobs === n) {
      const until = now() + 60_000;
      while ((await this.unfinished()) > 0) {
        if (now() > until) throw new Error("drain: jobs still unfinished 60 s after every handler ran");
        await sleep(2);
      }
    }
    const tEnd = now();
    const cpu = process.cpuUsage(cpu0);
    const db1 = await backendCpu(this.sql);
    await this.stopWorkers();
    // The clock starts when the worker is ready, or at its first job if it began before start() resolved.
    const t0 = first > 0 ? Math.min(tReady, first) : tReady;
    return {
      jobsPerSec: jobs / ((tEnd - t0) / 1000),
      jobs,
      workerCpuS: (cpu.user + cpu.system) / 1e6,
      dbCpuS: backendCpuDelta(db0, db1),
      startupMs: tReady - tStart,
      settleMs: tEnd - tSeen,
    };
  }

  async pickupLatency(count: number, gapMs: number, concurrency: number, idleMs = 1000): Promise<number[]> {
    const samples: number[] = [];
    let resolveAll!: () => void;
    const allSeen = new Promise<void>((r) => (resolveAll = r));
    await this.startWorkers(concurrency, (p) => {
      if (p.t > 0) samples.push(now() - p.t);
      if (samples.length === count) resolveAll();
    });
    await sleep(idleMs); // workers idle: listeners up, first empty polls done
    const start = now();
    const pending: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const due = start + i * gapMs;
      const wait = due - now();
      if (wait > 0) await sleep(wait);
      // Each enqueue is a single insert; the timestamp is taken just before the call.
      pending.push(this.enqueueOne({ t: now() }));
    }
    await Promise.all(pending);
    await withTimeout(allSeen, 30_000, () => `latency: only ${samples.length} of ${count} jobs started`);
    await this.stopWorkers();
    return samples;
  }
}

export async function withTimeout<T>(p: Promise<T>, ms: number, msg: () => string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(msg())), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function latencyStats(samples: number[]): { p50: number; p95: number; p99: number } {
  return { p50: percentile(samples, 50), p95: percentile(samples, 95), p99: percentile(samples, 99) };
}

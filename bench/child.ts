/**
 * One (system, run) pair of the benchmark, in a process of its own: the phases (enqueue, drains with
 * their dead tuples, WAL and CPU, pickup latency, svc's HTTP round trip; a system at its defaults only
 * the windowed drains), written as JSON to `outFile`. Uses Node's APIs only, so that bench/node_child.ts
 * runs it under Node 22 as well as under Deno.
 */
import process from "node:process";
import { writeFile } from "node:fs/promises";
import {
  createDatabase,
  currentLsn,
  deadTuples,
  dropDatabase,
  enableWalInspect,
  harnessSql,
  lsnDiff,
  tupleWrites,
  waitForBackendsGone,
  walBytesForDatabase,
} from "./lib.ts";
import {
  type BenchSystem,
  latencyStats,
  LIMIT_VARIANTS,
  type LimitVariant,
  poolSizeFor,
  type Variant,
} from "./systems/base.ts";
import { type Counts, fmtRate, label, parseSystem } from "./config.ts";

export interface ChildResult {
  system: string;
  run: number;
  skipped?: string;
  metrics: Record<string, number>;
  errors: string[];
  configs: string[];
  details: Record<string, unknown>;
}

/** An adapter module: its default export, and an optional `load()` that throws when it cannot run. */
export interface SystemModule {
  default: new (variant?: Variant) => BenchSystem;
  load?: () => Promise<unknown>;
}

export async function runChild(
  name: string,
  run: number,
  outFile: string,
  counts: Counts,
  importSystem: (base: string) => Promise<SystemModule>,
): Promise<void> {
  const result: ChildResult = { system: name, run, metrics: {}, errors: [], configs: [], details: {} };
  const save = () => writeFile(outFile, JSON.stringify(result));
  const spec = parseSystem(name);
  let System: SystemModule["default"];
  try {
    const mod = await importSystem(spec.base);
    if (typeof mod.load === "function") await mod.load();
    System = mod.default;
  } catch (e) {
    result.skipped = (e as Error).message;
    await save();
    return;
  }
  const variant: Variant = { defaults: spec.defaults };
  // An error escaping a system's own background work must not kill the whole run unseen.
  const onEscaped = (kind: string, reason: unknown) => {
    const text = String((reason as Error)?.stack ?? reason).split("\n").slice(0, 2).join(" ");
    const msg = `${kind} inside ${label(name)}: ${text}`;
    result.errors.push(msg);
    console.error(`[run ${run}] ${msg}`);
  };
  if ("Deno" in globalThis) {
    globalThis.addEventListener("unhandledrejection", (ev) => {
      ev.preventDefault();
      onEscaped("unhandled rejection", ev.reason);
    });
    globalThis.addEventListener("error", (ev) => {
      ev.preventDefault();
      onEscaped("uncaught exception", ev.error);
    });
  } else {
    process.on("unhandledRejection", (reason) => onEscaped("unhandled rejection", reason));
    process.on("uncaughtException", (error) => onEscaped("uncaught exception", error));
  }
  const t0 = performance.now();
  const log = (msg: string) =>
    console.log(
      `[run ${run}] ${label(name)} +${((performance.now() - t0) / 1000).toFixed(1)}s: ${msg}`,
    );
  const phase = async (label: string, f: () => Promise<void>) => {
    try {
      await f();
    } catch (e) {
      const msg = `${label}: ${(e as Error).message}`;
      result.errors.push(msg);
      log(`ERROR ${msg}`);
    }
  };

  if (spec.defaults) {
    // At the system's defaults, only the drain, over a window: some would take hours on 20,000 jobs.
    for (const c of counts.concurrencies) await phase(`drain window c${c}`, () => windowDrain(c));
    await save();
    return;
  }

  // 1. Enqueue: sequential single inserts, then batches.
  await phase("enqueue", async () => {
    const db = await createDatabase(`${name}_enq`);
    const s = new System(variant);
    try {
      await s.setup(db.url, { poolSize: 10 });
      result.configs.push(s.describe(10, 10));
      result.metrics.enq_seq = await s.enqueueSequential(counts.seq);
      result.metrics.enq_batch = await s.enqueueBatch(counts.batch, counts.batchSize);
      log(
        `enqueue sequential ${fmtRate(result.metrics.enq_seq)} jobs/s, ` +
          `batch ${fmtRate(result.metrics.enq_batch)} jobs/s`,
      );
    } finally {
      await s.teardown().catch(() => {});
      await dropDatabase(db.name);
    }
  });

  // 2 and 5. Drain queued no-op jobs; dead tuples and WAL of the whole job lifecycle. svc (queue storage,
  // under Deno) also drains with retention 0, and in full mode under each fleet-wide limit.
  const variants: { c: number; ret0: boolean; limit?: LimitVariant }[] = counts.concurrencies.flatMap((c) =>
    spec.base === "svc" && !spec.defaults && name === "svc"
      ? [
        { c, ret0: false },
        { c, ret0: true },
        ...(counts.limits ? LIMIT_VARIANTS.map((limit) => ({ c, ret0: false, limit })) : []),
      ]
      : [{ c, ret0: false }]
  );
  for (const { c, ret0, limit } of variants) {
    const key = `c${c}${ret0 ? "_ret0" : ""}${limit ? `_${limit}` : ""}`;
    await phase(`drain ${key}`, async () => {
      const db = await createDatabase(`${name}_${key}`);
      const sql = harnessSql(db.url);
      const s = new System({ ...variant, ...(limit ? { limit } : {}) });
      try {
        await enableWalInspect(sql);
        const poolSize = poolSizeFor(c);
        await s.setup(db.url, { poolSize, retentionZero: ret0 });
        if (!ret0 && !limit) result.configs.push(s.describe(c, poolSize));
        const tw0 = await tupleWrites(sql);
        const lsn0 = await currentLsn(sql);
        await s.enqueueBatch(counts.drain, counts.batchSize); // untimed here
        const r = await s.drain(counts.drain, c);
        const lsn1 = await currentLsn(sql);
        await s.teardown();
        await waitForBackendsGone(sql, db.name);
        const dead = await deadTuples(sql, s.schemas);
        // Every table of the database, enqueue through the drain and the system's own upkeep (its set-up
        // is before tw0, its teardown's statements after the workers stopped).
        const tw = (await tupleWrites(sql) - tw0) / counts.drain;
        result.metrics[`tw_${key}`] = tw;
        const walAll = await lsnDiff(sql, lsn1, lsn0);
        const walDb = await walBytesForDatabase(sql, lsn0, lsn1);
        result.metrics[`drain_${key}`] = r.jobsPerSec;
        result.metrics[`cpuw_${key}`] = r.workerCpuS / r.jobs * 1000;
        result.metrics[`cpudb_${key}`] = r.dbCpuS / r.jobs * 1000;
        result.metrics[`dead_${key}`] = dead.dead;
        result.metrics[`wal_${key}`] = walAll / counts.drain;
        if (walDb !== null) result.metrics[`waldb_${key}`] = walDb / counts.drain;
        result.details[`drain_${key}`] = { ...r, deadByTable: dead.tables, liveTuples: dead.live };
        log(
          `drain ${key}: ${fmtRate(r.jobsPerSec)} jobs/s (startup ${r.startupMs.toFixed(0)} ms, ` +
            `settle ${r.settleMs.toFixed(0)} ms), tuple writes/job ${
              tw.toFixed(2)
            }, dead tuples ${dead.dead}, WAL ${(walAll / counts.drain).toFixed(0)} ` +
            `B/job (this db ${
              walDb === null ? "n/a" : (walDb / counts.drain).toFixed(0)
            }), CPU-s per 1,000 jobs ` +
            `worker ${(r.workerCpuS / r.jobs * 1000).toFixed(3)}, database ${
              (r.dbCpuS / r.jobs * 1000).toFixed(3)
            }`,
        );
      } finally {
        await s.teardown().catch(() => {});
        await sql.end({ timeout: 5 });
        await dropDatabase(db.name);
      }
    });
  }

  // 3. Pickup latency with idle workers.
  await phase("latency", async () => {
    const db = await createDatabase(`${name}_lat`);
    const s = new System(variant);
    try {
      await s.setup(db.url, { poolSize: 10 });
      const samples = await s.pickupLatency(counts.latency, counts.gapMs, 10, counts.idleMs);
      const st = latencyStats(samples);
      result.metrics.lat_p50 = st.p50;
      result.metrics.lat_p95 = st.p95;
      result.metrics.lat_p99 = st.p99;
      log(
        `pickup latency p50 ${st.p50.toFixed(2)} ms, p95 ${st.p95.toFixed(2)} ms, p99 ${
          st.p99.toFixed(2)
        } ms`,
      );
    } finally {
      await s.teardown().catch(() => {});
      await dropDatabase(db.name);
    }
  });

  // 4. svc only (its default configuration): HTTP callback round trip.
  if (name === "svc" && typeof System.prototype.httpRoundTrip === "function") {
    await phase("http", async () => {
      const db = await createDatabase(`${name}_http`);
      const s = new System(variant);
      try {
        await s.setup(db.url, { poolSize: 10 });
        const r = await s.httpRoundTrip!(counts.http, counts.httpLatency, counts.gapMs);
        const st = latencyStats(r.latencies);
        result.metrics.http_rate = r.jobsPerSec;
        result.metrics.http_p50 = st.p50;
        result.metrics.http_p99 = st.p99;
        log(
          `HTTP round trip ${fmtRate(r.jobsPerSec)} jobs/s, p50 ${st.p50.toFixed(2)} ms, p99 ${
            st.p99.toFixed(2)
          } ms`,
        );
      } finally {
        await s.teardown().catch(() => {});
        await dropDatabase(db.name);
      }
    });
  }
  await save();

  /** Drains up to counts.windowJobs queued jobs for at most counts.windowMs at concurrency c. */
  async function windowDrain(c: number): Promise<void> {
    const key = `win_c${c}`;
    const db = await createDatabase(`${spec.base}_${key}`);
    const s = new System(variant);
    try {
      const poolSize = poolSizeFor(c);
      await s.setup(db.url, { poolSize });
      result.configs.push(s.describe(c, poolSize));
      await s.enqueueBatch(counts.windowJobs, counts.batchSize); // untimed here
      const r = await s.drainWindow(counts.windowJobs, c, counts.windowMs);
      result.metrics[key] = r.jobsPerSec;
      result.metrics[`cpuw_${key}`] = r.jobs ? r.workerCpuS / r.jobs * 1000 : NaN;
      result.metrics[`cpudb_${key}`] = r.jobs ? r.dbCpuS / r.jobs * 1000 : NaN;
      result.details[key] = r;
      log(
        `drain window c${c}: ${r.jobs} jobs, ${fmtRate(r.jobsPerSec)} jobs/s (startup ${
          r.startupMs.toFixed(0)
        } ms, settle ${r.settleMs.toFixed(0)} ms)`,
      );
    } finally {
      await s.teardown().catch(() => {});
      await dropDatabase(db.name);
    }
  }
}

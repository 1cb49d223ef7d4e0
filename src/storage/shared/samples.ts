/**
 * Per-minute samples (schema version 5, migrations/0005_samples.sql): the leader writes each finished
 * minute once, per queue its depth and per (queue, kind) the attempts that finished in it; the dashboard's
 * charts and the Kinds page read only these tables. The tables live in the svc schema and serve both
 * engines; each engine supplies its own depth and finished-attempt queries (`queueDepths`, `kindMinute`).
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";

/** A queue's depth by the one definition the metrics, the samples and the dashboard share. */
export interface QueueDepth {
  queue: string;
  /** Available jobs. */
  depth: number;
  /** An estimate: extrapolated (queue storage) or a lower bound (canonical's cap). */
  estimated: boolean;
  oldestAvailableAgeSeconds: number | null;
}

/** The attempts of one (queue, kind) that finished in one minute. */
export interface KindMinute {
  queue: string;
  kind: string;
  completed: number;
  /** Failed for good. */
  failed: number;
  /** Failed and scheduled for another attempt. */
  retried: number;
  runP50Ms: number | null;
  runP95Ms: number | null;
}

/** A per-minute sample row: a queue's depth (kind null) or a (queue, kind)'s finished attempts. */
export interface SampleRow extends Omit<KindMinute, "kind"> {
  minute: Date;
  kind: string | null;
  depth: number | null;
}

/** Which samples to read. */
export interface SamplesQuery {
  queue?: string;
  kind?: string;
  /** The last this many minutes. */
  minutes: number;
}

/** A kind's figures over the last minutes of samples. */
export interface KindStat {
  kind: string;
  completed: number;
  failed: number;
  retried: number;
  /** Failed attempts (retried or not) over finished attempts; null when none finished. */
  failureRate: number | null;
  runP50Ms: number | null;
  runP95Ms: number | null;
}

/**
 * A queue's available jobs are counted up to this many (queue storage: shared among its lanes); beyond, the
 * depth is a lower bound (`estimated`). See `queue_depths` in migrations/0005_samples.sql.
 */
export const DEPTH_CAP = 10_000;
/** Days of samples kept (the leader drops older day partitions). */
export const SAMPLE_KEEP_DAYS = 7;
/** A minute is sampled this long after it ends, so that attempts that finished late in it have committed. */
const SETTLE_SECONDS = 5;

/** Rows of an engine's `queue_depths` function. */
export async function readDepths(db: Db, fn: string, cap: number): Promise<QueueDepth[]> {
  const rows = await db.query(`select * from ${fn}($1)`, [cap]);
  return rows.map((r) => ({
    queue: r.queue,
    depth: Number(r.depth),
    estimated: r.estimated === true,
    oldestAvailableAgeSeconds: r.oldest_available_age_seconds === null
      ? null
      : Number(r.oldest_available_age_seconds),
  }));
}

/**
 * The attempts that finished in the minute starting at `minute`, per (queue, kind), from the engines'
 * `finished_attempts` functions (both while a storage transition is under way: exact percentiles over both).
 */
export async function readKindMinute(db: Db, fns: string[], minute: Date): Promise<KindMinute[]> {
  const rows = await db.query(
    `select f.queue, f.kind,
            count(*) filter (where f.outcome = 'completed') as completed,
            count(*) filter (where f.outcome = 'failed') as failed,
            count(*) filter (where f.outcome = 'retried') as retried,
            percentile_cont(0.5) within group (order by f.ms) filter (where f.ms is not null) as p50,
            percentile_cont(0.95) within group (order by f.ms) filter (where f.ms is not null) as p95
       from (${fns.map((fn) => `select * from ${fn}($1)`).join(" union all ")}) f
      group by f.queue, f.kind order by f.queue, f.kind`,
    [minute.toISOString()],
  );
  return rows.map((r) => ({
    queue: r.queue,
    kind: r.kind,
    completed: Number(r.completed),
    failed: Number(r.failed),
    retried: Number(r.retried),
    runP50Ms: r.p50 === null ? null : Number(r.p50),
    runP95Ms: r.p95 === null ? null : Number(r.p95),
  }));
}

/** The last minute that can be sampled now (by the database's clock), and whether it was already. */
export async function dueMinute(db: Db, n: SchemaNames): Promise<{ minute: Date; done: boolean }> {
  const [r] = await db.query(
    `select m.minute, exists (select 1 from ${n.q}.samples_taken t where t.minute = m.minute) as done
       from (select date_trunc('minute', now() - $1::int * interval '1 second') - interval '1 minute' as minute) m`,
    [SETTLE_SECONDS],
  );
  return { minute: new Date(r.minute), done: r.done };
}

/** Writes one minute's samples unless written already; whether this call wrote them. */
export async function writeSamples(
  db: Db,
  n: SchemaNames,
  minute: Date,
  depths: QueueDepth[],
  kinds: KindMinute[],
): Promise<boolean> {
  const [r] = await db.query(`select ${n.q}.record_samples($1, $2::text::jsonb, $3::text::jsonb) as wrote`, [
    minute.toISOString(),
    JSON.stringify(depths.map((d) => ({
      queue: d.queue,
      depth: d.depth,
      depth_estimated: d.estimated,
      age: d.oldestAvailableAgeSeconds,
    }))),
    JSON.stringify(kinds.map((k) => ({
      queue: k.queue,
      kind: k.kind,
      completed: k.completed,
      failed: k.failed,
      retried: k.retried,
      run_p50_ms: k.runP50Ms,
      run_p95_ms: k.runP95Ms,
    }))),
  ]);
  return r.wrote === true;
}

/** Creates the sample partitions ahead and drops those past retention; the number dropped. */
export async function maintainSamplePartitions(db: Db, n: SchemaNames): Promise<number> {
  const [r] = await db.query(`select ${n.q}.ensure_sample_partitions($1) as n`, [SAMPLE_KEEP_DAYS]);
  return Number(r.n);
}

/**
 * Samples of the last `minutes` minutes, oldest first: per queue (kind null) the depth, and per (queue,
 * kind) the finished attempts; filtered by queue and kind (a kind filter leaves out the depth rows).
 */
export async function listSamples(db: Db, n: SchemaNames, q: SamplesQuery): Promise<SampleRow[]> {
  const rows = await db.query(
    `with since as (select date_trunc('minute', now()) - $1::int * interval '1 minute' as t)
     select k.minute, k.queue, k.kind, null::bigint as depth, k.completed, k.failed, k.retried, k.run_p50_ms,
            k.run_p95_ms
       from ${n.q}.kind_samples k cross join since
      where k.minute >= since.t and ($2::text is null or k.queue = $2) and ($3::text is null or k.kind = $3)
     union all
     select d.minute, d.queue, null, d.depth, 0, 0, 0, null, null
       from ${n.q}.queue_samples d cross join since
      where d.minute >= since.t and ($2::text is null or d.queue = $2) and $3::text is null
     order by 1, 2, 3 nulls first`,
    [q.minutes, q.queue ?? null, q.kind ?? null],
  );
  return rows.map((r) => ({
    minute: new Date(r.minute),
    queue: r.queue,
    kind: r.kind,
    depth: r.depth === null ? null : Number(r.depth),
    completed: Number(r.completed),
    failed: Number(r.failed),
    retried: Number(r.retried),
    runP50Ms: r.run_p50_ms === null ? null : Number(r.run_p50_ms),
    runP95Ms: r.run_p95_ms === null ? null : Number(r.run_p95_ms),
  }));
}

/**
 * Per kind over the last `minutes` minutes of samples: completed and failed counts, failure rate (failed
 * attempts, retried or not, over finished attempts), and the run-time p50 and p95 as the median of the
 * minutes' p50 and the 95th percentile of the minutes' p95.
 */
export async function kindStats(db: Db, n: SchemaNames, minutes: number): Promise<KindStat[]> {
  const rows = await db.query(
    `select k.kind, sum(k.completed) as completed, sum(k.failed) as failed, sum(k.retried) as retried,
            percentile_cont(0.5) within group (order by k.run_p50_ms) as p50,
            percentile_cont(0.95) within group (order by k.run_p95_ms) as p95
       from ${n.q}.kind_samples k
      where k.minute >= date_trunc('minute', now()) - $1::int * interval '1 minute'
      group by k.kind order by k.kind`,
    [minutes],
  );
  return rows.map((r) => {
    const completed = Number(r.completed), failed = Number(r.failed), retried = Number(r.retried);
    const finished = completed + failed + retried;
    return {
      kind: r.kind,
      completed,
      failed,
      retried,
      failureRate: finished === 0 ? null : (failed + retried) / finished,
      runP50Ms: r.p50 === null ? null : Number(r.p50),
      runP95Ms: r.p95 === null ? null : Number(r.p95),
    };
  });
}

/** What an engine gives the sampler. */
export interface SampleSource {
  queueDepths(): Promise<QueueDepth[]>;
  kindMinute(minute: Date): Promise<KindMinute[]>;
}

/** The sample tables (shared by both engines), bound to a pool and to the engine that supplies the figures. */
export class SampleStore {
  constructor(
    private readonly db: Db,
    private readonly names: SchemaNames,
    private readonly source: SampleSource,
  ) {}

  /**
   * Leader: writes the samples of the last finished minute unless written already (idempotent), and
   * keeps the day partitions. Whether it wrote a minute.
   */
  record(): Promise<boolean> {
    return recordMinute(this.db, this.names, this.source);
  }
  /** Per-minute samples, oldest first. */
  list(q: SamplesQuery): Promise<SampleRow[]> {
    return listSamples(this.db, this.names, q);
  }
  /** Per kind over the last `minutes` minutes of samples. */
  kindStats(minutes: number): Promise<KindStat[]> {
    return kindStats(this.db, this.names, minutes);
  }
}

/**
 * The leader's sampling step: the last finished minute, unless it was sampled already (its depth is the
 * depth now, a few seconds after the minute ended). Keeps the day partitions once an hour. Whether it
 * wrote a minute.
 */
export async function recordMinute(db: Db, n: SchemaNames, source: SampleSource): Promise<boolean> {
  const { minute, done } = await dueMinute(db, n);
  if (done) return false;
  const depths = await source.queueDepths();
  const kinds = await source.kindMinute(minute);
  const wrote = await writeSamples(db, n, minute, depths, kinds);
  if (wrote && minute.getUTCMinutes() === 0) await maintainSamplePartitions(db, n);
  return wrote;
}

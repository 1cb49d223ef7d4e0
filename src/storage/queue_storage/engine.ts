/**
 * The `queue_storage` engine: append-only ring partitions for the hot path (ready rows; claims and
 * completions, a row per batch; closed and skipped rows for the rare ends), heap tables for the rare paths
 * (deferred, parked, unique keys, callbacks) and a history partitioned by time. The SQL lives in the
 * queue-storage functions of sql/1*_qs_*.sql; this class binds them to a pool. docs/reference/storage.md
 * explains the design and names its words (lane, shard, slot, cursor, position, claim batch, closure,
 * park, forward, adopt).
 *
 * A claimed attempt is addressed in the ring by its ready row's key (slot, queue, priority, shard, seq):
 * the engine keeps that locator for the attempts it claimed, so that their completions find their rows
 * by primary key. Attempts it did not claim (callbacks resolved by another process) are found by job id.
 *
 * Runtimes are heartbeated as a whole (the runtimes row), not per attempt: the leader rescues the open
 * attempts of a runtime that stopped heartbeating, so running jobs cost no write per heartbeat.
 */
import type { Db, Row } from "../../db/connection.ts";
import type { QsNames, SchemaNames } from "../../db/names.ts";
import type { Job, JobPage, JobState, ListJobsOptions, QueueInfo, RuntimeInfo } from "../../types.ts";
import { JOB_STATES, TERMINAL_STATES } from "../../types.ts";
import { jobFromJson } from "../../wire.ts";
import { notDeletable } from "../shared/delete.ts";
import { throttleOf } from "../shared/limits.ts";
import { readJobErrors, storedErrorText } from "../../job_errors.ts";
import type {
  AbandonedAttemptReport,
  AttemptRef,
  CallbackRecord,
  CallbackRegistration,
  CallbackResolution,
  Claimed,
  ClaimRequest,
  CompleteOptions,
  Completion,
  Failure,
  JobFilter,
  KindCounts,
  KindMinute,
  MaintainedJob,
  NewJob,
  Park,
  ParkRequest,
  QueueDepth,
  ResolveAction,
  ResolveArgs,
  Retention,
  RingReport,
  RuntimeReport,
  Snooze,
  StorageEngine,
  StorageState,
  ThroughputPoint,
} from "../engine.ts";
import { enqueueJobs } from "../shared/enqueue.ts";
import { DEPTH_CAP, readDepths, readKindMinute, SampleStore } from "../shared/samples.ts";
import { DEADLINE_GRACE_MS, policiesJson } from "../shared/attempts.ts";
import { queueDeclared, queuePaused, setQueuePaused } from "../shared/queues.ts";
import {
  type CallbackSql,
  getCallback,
  listCallbacks,
  registerCallback,
  resolveCallbacks,
  type ResolveRequest,
} from "../shared/callbacks.ts";
import { abandonedAttempts, deleteRuntime, listRuntimes, upsertRuntime } from "../shared/runtimes.ts";
import { cancelJob, getJob, listJobs, retryJob, runningJobs } from "../shared/sql_api.ts";
import { readStorageState } from "../shared/state.ts";
import { CronStore } from "../shared/cron.ts";
import { Batcher, ItemFailure } from "../../db/batcher.ts";

/** Where a claimed attempt's ready row is. */
/**
 * Where this engine's claim put an attempt: its ring slot (lookups by job id are pruned to that slot), and
 * the job's unique key, which its completion releases.
 */
interface Locator {
  /** The attempt's run lease (the map is keyed by job id alone). */
  lease: number;
  slot: number;
  claim: number;
  unique_key?: string;
}

/** The sizing recorded at install. */
export interface QsSizing {
  slots: number;
  rotationMs: number;
}

/** Counts at or above this are shown as lower bounds (`approximate`). */
export const COUNT_CAP = 10_000;
/** Jobs sampled for the counts per kind. */
export const KIND_SAMPLE = 100_000;
/** How long the leader waits for a slot's locks before it gives up until the next tick. */
const PRUNE_LOCK_WAIT_MS = 50;
/** How old a queue's list of exhausted ring generations may be before it is read again. */
const EXHAUSTED_REFRESH_MS = 1_000;
/** The longest the leader waits before it tries again to reclaim a slot it found busy. */
const PRUNE_BACKOFF_MAX_MS = 30_000;
/** How often, at most, the leader looks for long attempts in each sealed slot. */
const MOVE_EVERY_MS = 5_000;
/** How often the leader looks for open attempts of runtimes that have no row at all. */
const UNKNOWN_SWEEP_MS = 60_000;
/** How often the leader creates and drops history partitions. */
const HISTORY_EVERY_MS = 60_000;

/**
 * The ring's rotation interval: the recorded one, or longer when the completed retention needs it.
 * Completed jobs stay in their slot until the retention has passed since it was sealed, so the slots
 * but the current one and one spare must cover the retention: slots - 2 intervals of at least retention.
 */
export function rotationIntervalMs(sizing: QsSizing, completedRetentionMs: number): number {
  return Math.max(sizing.rotationMs, Math.ceil(completedRetentionMs / Math.max(1, sizing.slots - 2)));
}

/** The width of a history partition for a retention: a quarter of it, from 15 minutes to a day. */
export function historyWidthMs(retentionMs: number): number {
  return Math.min(86_400_000, Math.max(900_000, Math.round(retentionMs / 4)));
}

export class QueueStorageEngine implements StorageEngine {
  readonly name = "queue_storage";
  readonly cron: CronStore;
  readonly samples: SampleStore;
  readonly callbackSql: CallbackSql;
  private readonly qsSchema: string;
  /**
   * Where each attempt this engine claimed sits in the ring, by job id (a number key: no string per job). A
   * newer attempt of the same job replaces the entry; the older one then closes without a locator, through
   * the path for attempts claimed elsewhere.
   */
  private readonly locators = new Map<number, Locator>();
  /** Per queue: the ring generations it has nothing left to claim in (a bigint[] literal), and when read. */
  private readonly exhausted = new Map<string, { gens: string; at: number }>();
  private readonly refreshing = new Set<string>();
  /** Per sealed slot: when the leader tries to reclaim it again after finding it busy, and the backoff. */
  private readonly pruneBackoff = new Map<number, { until: number; delayMs: number }>();
  /** Per sealed slot: when the leader last looked for long attempts in it. */
  private readonly lastMove = new Map<number, number>();
  private readonly parks: Batcher<ParkRequest, boolean>;
  private readonly resolutions: Batcher<ResolveRequest, CallbackResolution>;
  private readonly fails: Batcher<Failure, Job | null>;
  /** The leader's deadline scan resumes here (a margin before the previous scan's bound). */
  private deadlineSince = new Date(0);
  private lastUnknownSweep = 0;
  private lastHistory = 0;

  constructor(
    private readonly db: Db,
    private readonly names: SchemaNames,
    readonly qs: QsNames,
    private readonly sizing: QsSizing,
    private readonly liveWithinMs = 90_000,
  ) {
    this.qsSchema = qs.q;
    this.cron = new CronStore(db, names);
    this.samples = new SampleStore(db, names, this);
    this.callbackSql = {
      table: `${this.qsSchema}.callbacks`,
      register: `${this.qsSchema}.register_callback`,
      resolveOne: `${this.qsSchema}.resolve_callback`,
      resolveBatch: `${this.qsSchema}.resolve_callbacks`,
    };
    this.parks = new Batcher(async (items) => {
      const json = JSON.stringify(items.map((p) => ({ ...this.ref(p), callback_id: p.callbackId })));
      // Parked or not, the worker writes nothing more for these attempts (a callback resolves them).
      items.forEach((p) => this.forget(p));
      const rows = await db.query(`select ${this.qsSchema}.park($1::text::jsonb) as id`, [json]);
      const parked = new Set(rows.map((r) => Number(r.id)));
      return items.map((p) => parked.has(p.id));
    });
    this.resolutions = new Batcher((items) => resolveCallbacks(db, this.callbackSql, items));
    this.fails = new Batcher((items) => this.failMany(items));
  }

  /** An attempt with its locator when this engine claimed it. */
  private ref(a: AttemptRef): Record<string, unknown> {
    const loc = this.locator(a);
    if (!loc) return { id: a.id, lease: a.lease };
    const r: Record<string, unknown> = { id: a.id, lease: a.lease, slot: loc.slot, claim: loc.claim };
    if (loc.unique_key !== undefined) r.unique_key = loc.unique_key;
    return r;
  }

  /** The locator of this attempt (none when this engine did not claim it, or claimed a later attempt since). */
  private locator(a: AttemptRef): Locator | undefined {
    const loc = this.locators.get(a.id);
    return loc && loc.lease === a.lease ? loc : undefined;
  }

  private forget(a: AttemptRef): void {
    if (this.locators.get(a.id)?.lease === a.lease) this.locators.delete(a.id);
  }

  forgetAttempt(a: AttemptRef): void {
    this.forget(a);
  }

  trackedAttempts(): number {
    return this.locators.size;
  }

  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return enqueueJobs(db, this.names, jobs);
  }

  async claim(req: ClaimRequest): Promise<Claimed> {
    const text =
      `select * from ${this.qsSchema}.claim_next($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, $8::text::bigint[],
                                                 $9::text::bigint[], $10::text::integer[])`;
    const params = [
      req.queue,
      req.limit,
      req.free,
      req.runtimeId,
      policiesJson(req),
      JSON.stringify(req.callbackTimeoutsMs),
      Math.max(0, Math.round(req.prefetchTtlMs)),
      this.exhaustedFor(req.queue),
      req.ended?.length ? `{${req.ended.map((a) => a.id).join(",")}}` : "{}",
      req.ended?.length ? `{${req.ended.map((a) => a.lease).join(",")}}` : "{}",
    ];
    const rows: ClaimRow[] = this.db.values
      ? await this.db.values(text, params)
      : (await this.db.query(text, params)).map((r) => Object.values(r));
    // A last row without a job: the queue counts units (concurrency, per key), and a limit cut the claim
    // short when it names one.
    const last = rows[rows.length - 1];
    const marker = last && last[C.job_id] === null ? rows.pop()! : undefined;
    const throttle = marker?.[C.throttled]
      ? throttleOf({ throttled: marker[C.throttled], in_use: marker[C.in_use], retry_at: marker[C.retry_at] })
      : undefined;
    inClaimOrder(rows, C.priority, C.seq);
    // One claim time for the claim's jobs (the same on every row), read once.
    let claimedAt: Date | null = null;
    for (const r of rows) {
      if (r[C.claimed_at]) {
        claimedAt = r[C.claimed_at];
        break;
      }
    }
    const jobs: Claimed = rows.map((r) => {
      const job = claimedJob(r, req.queue, claimedAt!);
      const loc: Locator = { lease: job.lease, slot: Number(r[C.slot]), claim: Number(r[C.claim_id]) };
      if (r[C.unique_key] !== null) loc.unique_key = r[C.unique_key];
      this.locators.set(job.id, loc);
      return job;
    });
    if (throttle) jobs.throttle = throttle;
    if (marker && marker[C.throttled] !== "rate") jobs.countsUnits = true;
    return jobs;
  }

  /**
   * The sealed ring generations in which `queue` has nothing left to claim, as a bigint[] literal for the
   * claim (`claim_exhausted`). A generation listed there stays exhausted until its slot is reclaimed (the
   * claim then reads the slot again), so an old list only costs reads, never a job: it is read again in the
   * background once it is a second old, and the claim that finds it old does not wait.
   */
  private exhaustedFor(queue: string): string {
    const entry = this.exhausted.get(queue);
    if ((!entry || Date.now() - entry.at >= EXHAUSTED_REFRESH_MS) && !this.refreshing.has(queue)) {
      this.refreshing.add(queue);
      this.db.query(`select ${this.qsSchema}.claim_exhausted($1)::text as gens`, [queue]).then(
        ([r]) => this.exhausted.set(queue, { gens: r.gens, at: Date.now() }),
        () => this.exhausted.delete(queue),
      ).finally(() => this.refreshing.delete(queue));
    }
    return entry?.gens ?? "{}";
  }

  /** Runs `close_attempts` for items with one action each; returns {job id: new state}. */
  private async close(items: (AttemptRef & Record<string, unknown>)[]): Promise<Map<number, JobState>> {
    const rows = await this.closeWith("close_attempts", items);
    return new Map(rows.map((r) => [Number(r.job_id), r.state as JobState]));
  }

  /**
   * Runs `fn` (`close_attempts`, or `close_attempts_read`, which also answers each closed job as it became)
   * for items with one action each; the rows it returns.
   */
  private async closeWith(
    fn: "close_attempts" | "close_attempts_read",
    items: (AttemptRef & Record<string, unknown>)[],
  ): Promise<Row[]> {
    if (items.length === 0) return [];
    const json = JSON.stringify(items.map((it, ord) => {
      const loc = this.locator(it);
      // The claim too: an outcome of a claim lost in a server crash must not end the claim made since (ADR 021).
      return { ...it, id: it.id, lease: it.lease, slot: loc?.slot, claim: loc?.claim, ord };
    }));
    // The locators are kept until the statement has answered: a retry after an error (the connection lost in
    // a server crash) still names the claim (ADR 021). An outcome given up for good is forgotten by its caller.
    const rows = await this.db.query(`select * from ${this.qsSchema}.${fn}($1::text::jsonb)`, [json]);
    items.forEach((it) => this.forget(it));
    return rows;
  }

  async giveBack(items: AttemptRef[]): Promise<number[]> {
    const done = await this.close(items.map((i) => ({ id: i.id, lease: i.lease, action: "give_back" })));
    return [...done.keys()];
  }

  async complete(items: Completion[], opts: CompleteOptions): Promise<number[]> {
    if (items.length === 0) return [];
    return await this.completeVia(this.db, items, opts.keepCompleted);
  }

  /**
   * The same function in the caller's transaction: under READ COMMITTED it takes the claim batch's lock and
   * checks in a new statement; under REPEATABLE READ or SERIALIZABLE it closes through a per-attempt
   * closed row, whose primary key makes a closure the snapshot cannot see a serialization failure.
   */
  async completeIn(db: Db, item: Completion, opts: CompleteOptions): Promise<boolean> {
    return (await this.completeVia(db, [item], opts.keepCompleted)).length === 1;
  }

  private async completeVia(db: Db, items: Completion[], keep: boolean): Promise<number[]> {
    const a = this.completionArrays(items);
    const rows = await db.query(
      `select ${this.qsSchema}.complete_many($1::text::bigint[], $2::text::integer[], $3::text::smallint[],
              $4::text::bigint[], $5::text::bigint[], $6::text::jsonb[], $7::text::text[], $8) as id`,
      [a.ids, a.leases, a.slots, a.claims, a.started, a.results, a.uniqueKeys, keep],
    );
    // Kept until answered, as in closeWith: a retried completion still names its claim.
    items.forEach((c) => this.forget(c));
    return rows.map((r) => Number(r.id));
  }

  /**
   * The completions as `complete_many()` reads them: array literals, one element per attempt, with the claim's
   * slot and batch and the job's unique key from the locator (null when this engine did not claim it).
   */
  private completionArrays(items: Completion[]): Record<
    "ids" | "leases" | "slots" | "claims" | "started" | "results" | "uniqueKeys",
    string
  > {
    let ids = "", leases = "", slots = "", claims = "", started = "", results = "", keys = "";
    for (let i = 0; i < items.length; i++) {
      const c = items[i];
      const loc = this.locator(c);
      const sep = i ? "," : "";
      ids += sep + c.id;
      leases += sep + c.lease;
      slots += sep + (loc ? loc.slot : "NULL");
      claims += sep + (loc ? loc.claim : "NULL");
      started += sep + (c.startedAt ? c.startedAt.getTime() : "NULL");
      const json = c.resultJson ?? (c.result === undefined ? "null" : JSON.stringify(c.result) ?? "null");
      results += sep + (json === "null" ? "NULL" : arrayElement(json));
      keys += sep + (loc?.unique_key === undefined ? "NULL" : arrayElement(loc.unique_key));
    }
    return {
      ids: `{${ids}}`,
      leases: `{${leases}}`,
      slots: `{${slots}}`,
      claims: `{${claims}}`,
      started: `{${started}}`,
      results: `{${results}}`,
      uniqueKeys: `{${keys}}`,
    };
  }

  fail(f: Failure): Promise<Job | null> {
    return this.fails.add(f);
  }

  /**
   * Fails a batch of attempts in one `close_attempts` call and reads the failed jobs back in one statement
   * (a failure-heavy queue paid two statements per job). A job with two attempts in one batch (an old lease
   * beside the current one) has the later ones failed on their own, so each answer is its own attempt's.
   */
  private async failMany(items: Failure[]): Promise<(Job | null | ItemFailure)[]> {
    if (items.length === 1) return await this.failBatch(items);
    try {
      return await this.failBatch(items);
    } catch {
      // One bad item must not fail its neighbours: each on its own, and only the bad one errs.
      const out: (Job | null | ItemFailure)[] = [];
      for (const f of items) {
        try {
          out.push((await this.failBatch([f]))[0]);
        } catch (e) {
          out.push(new ItemFailure(e));
        }
      }
      return out;
    }
  }

  private async failBatch(items: Failure[]): Promise<(Job | null)[]> {
    const first = new Map<number, Failure>();
    const again: Failure[] = [];
    for (const f of items) {
      if (first.has(f.id)) again.push(f);
      else first.set(f.id, f);
    }
    // Closed and read back in one call, so that a retry after an error never finds the failure written and
    // its answer (the job as it became, for the event and the metric) lost.
    const rows = await this.closeWith(
      "close_attempts_read",
      [...first.values()].map((f) => ({
        id: f.id,
        lease: f.lease,
        action: "fail",
        error: storedErrorText(f.error, f.stack),
        started_at: f.startedAt?.toISOString(),
        terminal: f.terminal,
        delay_ms: f.retryDelayMs === undefined ? null : Math.max(0, Math.round(f.retryDelayMs)),
      })),
    );
    const jobs = new Map<number, Job>();
    for (const r of rows) if (r.job) jobs.set(Number(r.job_id), jobFromJson(r.job));
    const out = new Map<Failure, Job | null>();
    for (const f of first.values()) out.set(f, jobs.get(f.id) ?? null);
    if (again.length) {
      const rest = await this.failBatch(again);
      again.forEach((f, i) => out.set(f, rest[i]));
    }
    return items.map((f) => out.get(f) ?? null);
  }

  async snooze({ id, lease, delayMs }: Snooze): Promise<boolean> {
    const done = await this.close([{
      id,
      lease,
      action: "snooze",
      delay_ms: Math.max(0, Math.round(delayMs)),
    }]);
    return done.has(id);
  }

  park(item: Park): Promise<boolean> {
    return this.parks.add({ id: item.id, lease: item.lease, callbackId: item.callbackId });
  }

  getJob(id: number): Promise<Job | null> {
    return getJob(this.db, this.names, id);
  }
  listJobs(opts: ListJobsOptions): Promise<JobPage> {
    return listJobs(this.db, this.names, opts);
  }
  runningJobs(limit: number): Promise<Job[]> {
    return runningJobs(
      this.db,
      `(select * from ${this.qsSchema}.jobs_running
        union all select * from ${this.qsSchema}.jobs_parked where state = 'running') j`,
      limit,
    );
  }
  cancel(id: number): Promise<Job> {
    return cancelJob(this.db, this.names, id);
  }
  retry(id: number): Promise<Job> {
    return retryJob(this.db, this.names, id);
  }
  /**
   * Deletes a finished job, under the job's lock that retry takes: its history rows, callbacks and unique
   * key go, and a `deleted` row hides it from every read; its ring rows stay (the slot's counts of claimed
   * and ended jobs must hold) and go with their slot's TRUNCATE.
   */
  deleteJob(id: number): Promise<Job> {
    return this.db.begin(async (tx) => {
      await tx.query(`select pg_advisory_xact_lock(hashtextextended($1 || ':job:' || $2, 0))`, [
        this.qs.schema,
        id,
      ]);
      const [r] = await tx.query(`select ${this.qsSchema}.get_job($1) as j`, [id]);
      const job = r?.j ? jobFromJson(r.j) : null;
      if (!job || !TERMINAL_STATES.includes(job.state)) throw notDeletable(id, job?.state ?? null);
      await tx.query(
        `with h as (delete from ${this.qsSchema}.history where job_id = $1),
              d as (insert into ${this.qsSchema}.deleted (job_id) values ($1) on conflict do nothing),
              cb as (delete from ${this.qsSchema}.callbacks where job_id = $1)
         delete from ${this.qsSchema}.unique_keys where job_id = $1`,
        [id],
      );
      return job;
    });
  }

  private async bulk(filter: JobFilter, action: "cancel" | "retry", dryRun: boolean): Promise<number> {
    const [r] = await this.db.query(`select ${this.qsSchema}.bulk($1::text::jsonb, $2, $3) as n`, [
      JSON.stringify({ state: filter.state, kind: filter.kind, queue: filter.queue }),
      action,
      dryRun,
    ]);
    return Number(r.n);
  }
  /** Retries the finished canonical jobs matching `filter` into queue storage (from mixed_transition on). */
  async retryCanonical(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    const where = `${this.names.q}.job_filter_sql($1::text::jsonb) `;
    const [w] = await this.db.query(`select ${where} as w`, [
      JSON.stringify({ state: filter.state, kind: filter.kind, queue: filter.queue }),
    ]);
    const ids =
      `select id from ${this.names.q}.jobs where ${w.w} and state in ('completed', 'failed', 'cancelled')`;
    const [r] = await this.db.query(
      opts.dryRun
        ? `select count(*) as n from (${ids}) x`
        : `select ${this.qsSchema}.adopt(array(${ids}), true) as n`,
    );
    return Number(r.n);
  }

  /** The leader's part of a mixed transition: canonical jobs that wait move here. */
  async adoptWaiting(): Promise<number> {
    const [r] = await this.db.query(`select ${this.qsSchema}.adopt_waiting() as n`);
    return Number(r.n);
  }

  bulkCancel(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return this.bulk(filter, "cancel", opts.dryRun ?? false);
  }
  bulkRetry(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return this.bulk(filter, "retry", opts.dryRun ?? false);
  }

  pauseQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.names, name, true);
  }
  queuePaused(name: string): Promise<boolean> {
    return queuePaused(this.db, this.names, name);
  }
  resumeQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.names, name, false);
  }
  async queueKnown(name: string, liveWithinMs = this.liveWithinMs): Promise<boolean> {
    if (await queueDeclared(this.db, this.names, name, liveWithinMs)) return true;
    const [r] = await this.db.query(
      `select exists (select 1 from ${this.qsSchema}.lanes where queue = $1)
           or exists (select 1 from ${this.qsSchema}.deferred where queue = $1)
           or exists (select 1 from ${this.qsSchema}.parked where queue = $1) as known`,
      [name],
    );
    return r.known;
  }

  async listQueues(): Promise<QueueInfo[]> {
    const [r] = await this.db.query(`select ${this.qsSchema}.queue_stats($1) as s`, [COUNT_CAP]);
    return (r.s as Row[]).map((x) => ({
      name: x.name,
      paused: x.paused,
      counts: Object.fromEntries(JOB_STATES.map((s) => [s, Number(x.counts[s] ?? 0)])) as Record<
        JobState,
        number
      >,
      approximate: x.approximate ?? [],
      oldestAvailableAgeSeconds: x.oldest_available_age_seconds === null
        ? null
        : Number(x.oldest_available_age_seconds),
    }));
  }

  async kindCounts(): Promise<KindCounts> {
    const [r] = await this.db.query(`select ${this.qsSchema}.kind_counts($1) as k`, [KIND_SAMPLE]);
    return {
      approximate: r.k.approximate,
      kinds: (r.k.kinds as Row[]).map((k) => ({
        kind: k.kind,
        counts: Object.fromEntries(JOB_STATES.map((s) => [s, Number(k.counts[s] ?? 0)])) as Record<
          JobState,
          number
        >,
      })),
    };
  }

  async throughput(minutes: number): Promise<ThroughputPoint[]> {
    const rows = await this.db.query(`select * from ${this.qsSchema}.throughput($1)`, [minutes]);
    return rows.map((r) => ({ minute: r.minute, completed: Number(r.completed), failed: Number(r.failed) }));
  }
  queueDepths(): Promise<QueueDepth[]> {
    return readDepths(this.db, `${this.qsSchema}.queue_depths`, DEPTH_CAP);
  }
  /** The SQL function of the attempts that finished in a minute. */
  get finishedAttemptsFn(): string {
    return `${this.qsSchema}.finished_attempts`;
  }
  kindMinute(minute: Date): Promise<KindMinute[]> {
    return readKindMinute(this.db, [this.finishedAttemptsFn], minute);
  }

  registerCallback(r: CallbackRegistration): Promise<string | null> {
    return registerCallback(this.db, this.callbackSql, r.id, r.lease, r.timeoutMs, r.kind);
  }
  getCallback(id: string): Promise<CallbackRecord | null> {
    return getCallback(this.db, this.callbackSql, id);
  }
  listCallbacks(jobId: number): Promise<CallbackRecord[]> {
    return listCallbacks(this.db, this.callbackSql, jobId);
  }
  resolveCallback(id: string, action: ResolveAction, args: ResolveArgs): Promise<CallbackResolution> {
    return this.resolutions.add({ id, action, ...args });
  }

  async promote(): Promise<number> {
    const [r] = await this.db.query(`select ${this.qsSchema}.promote() as n`);
    return Number(r.n);
  }

  async rescue(rescueAfterMs: number): Promise<MaintainedJob[]> {
    const now = Date.now();
    const unknown = now - this.lastUnknownSweep >= UNKNOWN_SWEEP_MS;
    if (unknown) this.lastUnknownSweep = now;
    const since = this.deadlineSince;
    const rows = await this.db.query(`select * from ${this.qsSchema}.rescue($1, $2, $3, $4)`, [
      rescueAfterMs,
      DEADLINE_GRACE_MS,
      since.toISOString(),
      unknown,
    ]);
    // Deadlines that passed before this scan's bound are done; keep a minute of overlap for attempts
    // whose claim committed late.
    this.deadlineSince = new Date(now - DEADLINE_GRACE_MS - 60_000);
    return rows.map((r) => ({ id: Number(r.id), kind: r.kind, state: r.state, reason: r.reason }));
  }

  async expireCallbacks(): Promise<MaintainedJob[]> {
    const rows = await this.db.query(`select * from ${this.qsSchema}.expire_callbacks()`);
    return rows.map((r) => ({
      id: Number(r.id),
      kind: r.kind,
      state: r.state,
      reason: "callback timed out",
      callbackId: r.callback_id,
    }));
  }

  async cleanup(retention: Retention): Promise<number> {
    const [c] = await this.db.query(`select ${this.qsSchema}.expire_history('completed', $1, $2) as n`, [
      retention.completed,
      PRUNE_LOCK_WAIT_MS,
    ]);
    const [f] = await this.db.query(`select ${this.qsSchema}.expire_history('failed', $1, $2) as n`, [
      retention.failed,
      PRUNE_LOCK_WAIT_MS,
    ]);
    // Tombstones of deleted jobs whose rows are all gone.
    await this.db.query(
      `delete from ${this.qsSchema}.deleted x
        where not exists (select 1 from ${this.qsSchema}.ready r where r.job_id = x.job_id)
          and not exists (select 1 from ${this.qsSchema}.history h where h.job_id = x.job_id)`,
    );
    // Callbacks of jobs that finished long ago: the longer retention keeps them as long as their job.
    await this.db.query(
      `delete from ${this.qsSchema}.callbacks where state <> 'pending'
          and resolved_at < now() - $1::bigint * interval '1 millisecond'`,
      [Math.max(retention.completed, retention.failed)],
    );
    return Number(c.n) + Number(f.n);
  }

  async refreshStatistics(): Promise<boolean> {
    // Every table of the schema, ring partitions and history ranges included (admin reads plan on their
    // statistics; autovacuum may be off): those never analyzed, and those changed by more than twice their
    // size (at least 1,000 rows) since.
    const rows = await this.db.query(
      `select c.oid::regclass::text as rel
         from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
         left join pg_stat_user_tables s on s.relid = c.oid
        where ns.nspname = $1 and c.relkind = 'r'
          and coalesce(s.n_mod_since_analyze, 0) > greatest(1000, 2 * greatest(c.reltuples, 0))`,
      [this.qs.schema],
    );
    let analyzed = false;
    for (const r of rows) {
      try {
        await this.db.begin(async (tx) => {
          await tx.query(`select set_config('lock_timeout', '50ms', true)`);
          await tx.query(`analyze ${r.rel}`);
        });
        analyzed = true;
      } catch (e) {
        if ((e as { code?: string }).code !== "55P03") throw e;
      }
    }
    return analyzed;
  }

  /**
   * How long a claim can stay in the ring before its slot is needed again: the slots but the current one
   * and a spare, times the rotation interval for this completed retention. An orphaned attempt (a killed
   * worker's) pins its slot until it is rescued, so this should be well above `rescueAfter`.
   */
  ringSpanMs(completedRetentionMs: number): number {
    return Math.max(1, this.sizing.slots - 2) * rotationIntervalMs(this.sizing, completedRetentionMs);
  }

  async maintainRing(retention: Retention, parkAfterMs: number): Promise<RingReport> {
    const report: RingReport = { rotated: null, pruned: {}, moved: 0 };
    // A leader that died between a rotation and its sync left the position behind: rotations wait for it.
    await this.db.query(`select ${this.qsSchema}.sync_position()`);
    const [rot] = await this.db.query(`select ${this.qsSchema}.rotate($1) as slot`, [
      rotationIntervalMs(this.sizing, retention.completed),
    ]);
    report.rotated = rot.slot === null ? null : Number(rot.slot);
    // Producers move to the new slot once its rotation has committed.
    if (report.rotated !== null) await this.db.query(`select ${this.qsSchema}.sync_position()`);
    // Sealed slots, oldest generation first.
    const slots = await this.db.query(
      `select slot, generation from (
         select distinct on (slot) slot, generation from ${this.qsSchema}.ring_rotations order by slot, generation desc) s
        where slot <> ${this.qsSchema}.current_slot()
        order by generation`,
    );
    const empty = await this.db.query(
      `select count(*) as n from generate_series(0, $1 - 1) s where ${this.qsSchema}.slot_empty(s::smallint)`,
      [this.sizing.slots],
    );
    // Forward a paused backlog only when the ring is short of empty slots.
    const forward = Number(empty[0].n) < 2;
    const now = Date.now();
    for (const { slot: s } of slots) {
      const slot = Number(s);
      // Attempts that have run for parkAfter leave the ring; looking for them every tick in every sealed
      // slot costs more than the precision is worth.
      if (now - (this.lastMove.get(slot) ?? 0) >= Math.min(MOVE_EVERY_MS, parkAfterMs / 4)) {
        this.lastMove.set(slot, now);
        report.moved += Number(
          (await this.db.query(`select ${this.qsSchema}.move_long_attempts($1, $2) as n`, [
            slot,
            parkAfterMs,
          ]))[0].n,
        );
      }
      // A slot found busy (a reader holds its tables: a long transaction that read the ring, say) is tried
      // again after a backoff, and without waiting for the lock: a try that waits up to PRUNE_LOCK_WAIT_MS
      // queues the claims of that slot behind the waiting lock.
      const backoff = this.pruneBackoff.get(slot);
      if (backoff && now < backoff.until) continue;
      // Completed jobs stay readable in their slot: it is reclaimed once the completed retention has
      // passed since it was sealed.
      const [p] = await this.db.query(`select ${this.qsSchema}.prune($1, $2, $3, $4) as outcome`, [
        slot,
        backoff ? 0 : PRUNE_LOCK_WAIT_MS,
        forward,
        Math.max(0, Math.round(retention.completed)),
      ]);
      if (p.outcome === "busy") {
        const delayMs = Math.min(PRUNE_BACKOFF_MAX_MS, Math.max(1_000, (backoff?.delayMs ?? 500) * 2));
        this.pruneBackoff.set(slot, { until: Date.now() + delayMs, delayMs });
      } else {
        this.pruneBackoff.delete(slot);
      }
      if (p.outcome !== "empty") report.pruned[String(slot)] = p.outcome;
    }
    if (Date.now() - this.lastHistory >= HISTORY_EVERY_MS) {
      this.lastHistory = Date.now();
      for (const [cls, ms] of [["completed", retention.completed], ["failed", retention.failed]] as const) {
        await this.db.query(`select ${this.qsSchema}.ensure_history($1, $2, 3, $3)`, [
          cls,
          historyWidthMs(ms),
          PRUNE_LOCK_WAIT_MS,
        ]);
      }
    }
    return report;
  }

  abandonedAttempts(): Promise<AbandonedAttemptReport[]> {
    return abandonedAttempts(this.db, this.names);
  }
  upsertRuntime(r: RuntimeReport): Promise<void> {
    return upsertRuntime(this.db, this.names, r);
  }
  deleteRuntime(id: string): Promise<void> {
    return deleteRuntime(this.db, this.names, id);
  }
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]> {
    return listRuntimes(this.db, this.names, liveWithinMs);
  }
  storageState(): Promise<StorageState> {
    return readStorageState(this.db, this.names);
  }
}

/** A text element of a PostgreSQL array literal: quoted, with backslashes and double quotes escaped. */
function arrayElement(s: string): string {
  return `"${s.replace(/[\\"]/g, "\\$&")}"`;
}

/**
 * Puts a claim's rows in claim order (priority, then lane position), in which held jobs start: the claim
 * returns them in that order without a final sort, which this check does not take on trust.
 */
export function inClaimOrder(
  rows: Record<string | number, any>[],
  priority: string | number = "priority",
  seq: string | number = "seq",
): void {
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1], b = rows[i];
    if (a[priority] > b[priority] || (a[priority] === b[priority] && a[seq] > b[seq])) {
      rows.sort((x, y) => x[priority] - y[priority] || x[seq] - y[seq]);
      return;
    }
  }
}

/**
 * The columns of `claim_next()` by position: the claim reads its rows as arrays (`Db.values`), since an object
 * per row with 31 properties, as the driver builds it, was a quarter of what the worker allocated per job.
 */
const C = {
  slot: 0,
  priority: 2,
  seq: 4,
  job_id: 5,
  kind: 6,
  args: 7,
  attempt: 8,
  max_attempts: 9,
  lease: 10,
  run_at: 11,
  created_at: 12,
  errors: 13,
  tags: 14,
  metadata: 15,
  unique_key: 16,
  trace_context: 17,
  claimed_at: 18,
  deadline_at: 19,
  prefetched: 20,
  effective_max_attempts: 21,
  callback_id: 23,
  callback_timeout_at: 24,
  claim_id: 25,
  limit_key: 26,
  throttled: 27,
  in_use: 28,
  retry_at: 29,
} as const;
/** A row of `claim_next()` as an array of its columns. */
type ClaimRow = any[];

/** A Job from a row of `claim_next()` of `queue`, claimed at `claimedAt`. */
function claimedJob(r: ClaimRow, queue: string, claimedAt: Date): Job {
  const prefetched = r[C.prefetched];
  const job: Job = {
    id: Number(r[C.job_id]),
    kind: r[C.kind],
    queue,
    args: r[C.args] ?? {},
    state: "running",
    priority: Number(r[C.priority]),
    attempt: Number(r[C.attempt]),
    maxAttempts: Number(r[C.max_attempts]),
    effectiveMaxAttempts: r[C.effective_max_attempts] === null ? null : Number(r[C.effective_max_attempts]),
    runAt: r[C.run_at],
    createdAt: r[C.created_at],
    claimedAt,
    attemptedAt: prefetched ? null : claimedAt,
    finalizedAt: null,
    heartbeatAt: claimedAt,
    deadlineAt: r[C.deadline_at] ?? null,
    errors: readJobErrors(r[C.errors]),
    tags: r[C.tags] ?? [],
    metadata: r[C.metadata] ?? {},
    result: null,
    uniqueKey: r[C.unique_key] ?? null,
    limitKey: r[C.limit_key] ?? null,
    callbackId: r[C.callback_id] ?? null,
    callbackTimeoutAt: r[C.callback_timeout_at] ?? null,
    lease: Number(r[C.lease]),
    attemptedBy: null,
  };
  if (r[C.trace_context]) job.traceContext = r[C.trace_context];
  if (prefetched) job.prefetched = true;
  return job;
}

/**
 * The engine the client and the worker use. It reads the storage state and hands every operation to the
 * engine (or engines) that state names:
 * - `canonical`, `prepared`: the canonical engine for everything;
 * - `mixed_transition`: new work on queue storage, while the canonical backlog drains in place: claims take
 *   canonical jobs first, then queue-storage ones; an attempt's outcome goes to the engine that claimed it;
 *   the leader's duties run on both, and moves canonical jobs that wait (scheduled, retryable, parked HTTP
 *   attempts) to queue storage; counts are the sum of both;
 * - `active`: queue storage; canonical's retained finished jobs stay readable and are cleaned up.
 * Enqueue, single-job reads and admin changes route in the database itself (the SQL API), so they are right
 * even while a state change happens. The state is read again when `refresh()` is called (a worker does on
 * the `<schema>_storage` notification) and at most every few seconds otherwise.
 */
import type { Db } from "../db/connection.ts";
import { qsNames, type SchemaNames } from "../db/names.ts";
import {
  type Job,
  JOB_STATES,
  type JobPage,
  type JobState,
  type ListJobsOptions,
  type QueueInfo,
} from "../types.ts";
import type { RuntimeInfo } from "../types.ts";
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
} from "./engine.ts";
import { CanonicalEngine } from "./canonical/engine.ts";
import { QueueStorageEngine } from "./queue_storage/engine.ts";
import { CronStore } from "./shared/cron.ts";
import { readStorageState } from "./shared/state.ts";
import { abandonedAttempts, pruneRuntimes } from "./shared/runtimes.ts";
import { enqueueJobs } from "./shared/enqueue.ts";
import { type ProgressItem, pruneProgress, withProgress, writeProgress } from "./shared/progress.ts";
import { pruneLimitLog } from "./shared/limits.ts";
import { readKindMinute, SampleStore } from "./shared/samples.ts";
import { cancelJob, getJob, listJobs, retryJob } from "./shared/sql_api.ts";
import { JobNotFoundError, ValidationError } from "../errors.ts";

/** How the engines are used in a storage state. */
export type Mode = "canonical" | "mixed" | "queue_storage";

/** How long a read of the storage state is trusted without a notification. */
const STATE_TTL_MS = 5_000;

/** Options of the routed engine. */
export interface RoutedOptions {
  /** Heartbeat window for counting live runtimes (ms). */
  liveWithinMs?: number;
  /** The engines this process may execute (default both); `["canonical"]` acts as a process of the older line. */
  engines?: ("canonical" | "queue_storage")[];
}

export class RoutedEngine implements StorageEngine {
  readonly name = "routed";
  readonly cron: CronStore;
  readonly samples: SampleStore;
  readonly canonical: CanonicalEngine;
  readonly engines: ("canonical" | "queue_storage")[];
  private qs: QueueStorageEngine | null = null;
  private state: Promise<{ mode: Mode; transition: string }> | null = null;
  private readAt = 0;
  /**
   * Which engine claimed an attempt (`id:lease`), for its outcome: kept only while two engines claim (the
   * mixed transition); with one, the mode names the owner.
   */
  private readonly owners = new Map<string, StorageEngine>();
  private readonly liveWithinMs: number;

  constructor(private readonly db: Db, private readonly names: SchemaNames, opts: RoutedOptions = {}) {
    this.liveWithinMs = opts.liveWithinMs ?? 90_000;
    this.engines = opts.engines ?? ["canonical", "queue_storage"];
    this.canonical = new CanonicalEngine(db, names, this.liveWithinMs);
    this.cron = new CronStore(db, names);
    this.samples = new SampleStore(db, names, this);
  }

  /** The mode of the current storage state (read at most every few seconds, or after `refresh`). */
  mode(): Promise<Mode> {
    return this.current().then((s) => s.mode);
  }

  /** The transition state as this engine last read it. */
  async transition(): Promise<string> {
    return (await this.current()).transition;
  }

  /** Reads the storage state again at the next call (after a notification of a change). */
  refresh(): void {
    this.state = null;
  }

  /** The queue-storage engine (null before schema version 4). */
  async queueStorage(): Promise<QueueStorageEngine | null> {
    await this.current();
    return this.qs;
  }

  private current(): Promise<{ mode: Mode; transition: string }> {
    if (this.state && Date.now() - this.readAt < STATE_TTL_MS) return this.state;
    const prev = this.state;
    this.readAt = Date.now();
    this.state = this.read().catch((e) => {
      this.state = prev && Date.now() - this.readAt < STATE_TTL_MS * 12 ? prev : null;
      if (!prev) throw e;
      return prev;
    });
    return this.state;
  }

  private async read(): Promise<{ mode: Mode; transition: string }> {
    const [r] = await this.db.query(`select to_jsonb(s) as s from ${this.names.q}.storage_state s`);
    const s = r?.s ?? {};
    if (s.qs_schema && !this.qs) {
      this.qs = new QueueStorageEngine(
        this.db,
        this.names,
        qsNames(s.qs_schema),
        { slots: Number(s.qs_slots), rotationMs: Number(s.qs_rotation_ms) },
        this.liveWithinMs,
      );
    }
    const transition = String(s.transition ?? "canonical");
    const canonicalOnly = !this.engines.includes("queue_storage");
    if (!this.engines.includes("canonical") && transition !== "active" && transition !== "mixed_transition") {
      throw new ValidationError(
        `this process executes only queue storage, but the database is ${transition}: run svc storage prepare and ` +
          "enter-mixed-transition first (docs/guide/upgrade.md)",
      );
    }
    let mode: Mode = transition === "active"
      ? "queue_storage"
      : transition === "mixed_transition"
      ? "mixed"
      : "canonical";
    if (!this.qs || canonicalOnly) mode = "canonical";
    return { mode, transition };
  }

  /** The engines whose jobs a process in `mode` handles: canonical first. */
  private async active(): Promise<StorageEngine[]> {
    const mode = await this.mode();
    if (mode === "canonical") return [this.canonical];
    if (mode === "queue_storage") return [this.qs!];
    return [this.canonical, this.qs!];
  }

  /** The engine that owns an attempt: the one that claimed it here, else where the job is now. */
  private async ownerOf(a: AttemptRef): Promise<StorageEngine> {
    const known = this.owners.get(`${a.id}:${a.lease}`);
    if (known) return known;
    const mode = await this.mode();
    if (mode !== "mixed") return mode === "canonical" ? this.canonical : this.qs!;
    const rows = await this.db.query(`select 1 from ${this.names.q}.jobs where id = $1`, [a.id]);
    return rows.length ? this.canonical : this.qs!;
  }

  private forget(items: AttemptRef[]): void {
    for (const a of items) this.owners.delete(`${a.id}:${a.lease}`);
  }

  /** Splits items by owner, runs `f` per owner, and gathers the results. */
  private async byOwner<T extends AttemptRef, R>(
    items: T[],
    f: (e: StorageEngine, xs: T[]) => Promise<R[]>,
  ): Promise<R[]> {
    if (this.owners.size === 0) {
      // Nothing claimed during a mixed transition is in flight: one engine owns every attempt.
      const mode = await this.mode();
      if (mode !== "mixed") return await f(mode === "canonical" ? this.canonical : this.qs!, items);
    }
    const groups = new Map<StorageEngine, T[]>();
    for (const it of items) {
      // The owner map answers on the hot path; only an attempt it does not know costs an await.
      const e = this.owners.get(`${it.id}:${it.lease}`) ?? await this.ownerOf(it);
      const group = groups.get(e);
      if (group) group.push(it);
      else groups.set(e, [it]);
    }
    const out: R[] = [];
    for (const [e, xs] of groups) out.push(...await f(e, xs));
    return out;
  }

  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return enqueueJobs(db, this.names, jobs);
  }

  async claim(req: ClaimRequest): Promise<Claimed> {
    const out: Claimed = [];
    const engines = await this.active();
    for (const e of engines) {
      const limit = req.limit - out.length;
      if (limit <= 0) break;
      const jobs = await e.claim({ ...req, limit, free: Math.max(0, req.free - out.length) });
      if (engines.length > 1) { for (const j of jobs) this.owners.set(`${j.id}:${j.lease}`, e); }
      out.push(...jobs);
      // Each engine's claim takes what the queue's limits leave after the other's (the same claim lock and
      // log): the answer is throttled when the last engine asked was.
      out.throttle = jobs.throttle;
      // Only when every engine asked honours the ended attempts (one engine runs outside a transition).
      out.countsUnits = jobs.countsUnits;
    }
    if (!out.throttle) delete out.throttle;
    if (!out.countsUnits) delete out.countsUnits;
    return out;
  }

  async giveBack(items: AttemptRef[]): Promise<number[]> {
    try {
      return await this.byOwner(items, (e, xs) => e.giveBack(xs));
    } finally {
      this.forget(items);
    }
  }
  async complete(items: Completion[], opts: CompleteOptions): Promise<number[]> {
    try {
      return await this.byOwner(items, (e, xs) => e.complete(xs, opts));
    } finally {
      this.forget(items);
    }
  }
  async completeIn(db: Db, item: Completion, opts: CompleteOptions): Promise<boolean> {
    try {
      return await (await this.ownerOf(item)).completeIn(db, item, opts);
    } finally {
      this.forget([item]);
    }
  }
  async fail(item: Failure): Promise<Job | null> {
    try {
      return await (await this.ownerOf(item)).fail(item);
    } finally {
      this.forget([item]);
    }
  }
  async snooze(item: Snooze): Promise<boolean> {
    try {
      return await (await this.ownerOf(item)).snooze(item);
    } finally {
      this.forget([item]);
    }
  }
  async heartbeat(items: AttemptRef[]): Promise<void> {
    await this.byOwner(items, async (e, xs) => {
      await e.heartbeat?.(xs);
      return [];
    });
  }
  async park(item: Park): Promise<boolean> {
    const owner = await this.ownerOf(item);
    this.forget([item]);
    return owner.park(item);
  }
  forgetAttempt(a: AttemptRef): void {
    const owner = this.owners.get(`${a.id}:${a.lease}`);
    this.forget([a]);
    (owner ?? this.qs)?.forgetAttempt?.(a);
  }
  trackedAttempts(): number {
    return this.owners.size + (this.qs?.trackedAttempts() ?? 0);
  }

  async getJob(id: number): Promise<Job | null> {
    const job = await getJob(this.db, this.names, id);
    if (job) await withProgress(this.db, this.names, [job]);
    return job;
  }
  listJobs(opts: ListJobsOptions): Promise<JobPage> {
    return listJobs(this.db, this.names, opts);
  }
  /** Running jobs of every engine that has some (both during a transition), merged in one order. */
  async runningJobs(limit: number): Promise<Job[]> {
    const engines = await this.active();
    if (engines.length === 1) {
      return await withProgress(this.db, this.names, await engines[0].runningJobs(limit));
    }
    const all = (await Promise.all(engines.map((e) => e.runningJobs(limit)))).flat();
    const start = (j: Job) => (j.attemptedAt ? new Date(j.attemptedAt).getTime() : Infinity);
    return await withProgress(
      this.db,
      this.names,
      all.sort((a, b) => start(a) - start(b) || a.id - b.id).slice(0, limit),
    );
  }
  cancel(id: number): Promise<Job> {
    return cancelJob(this.db, this.names, id);
  }
  retry(id: number): Promise<Job> {
    return retryJob(this.db, this.names, id);
  }
  /** While mixed, the job is in one engine: canonical first, then queue storage. */
  async deleteJob(id: number): Promise<Job> {
    const engines = await this.active();
    for (let i = 0;; i++) {
      try {
        return await engines[i].deleteJob(id);
      } catch (e) {
        if (!(e instanceof JobNotFoundError) || i === engines.length - 1) throw e;
      }
    }
  }
  async bulkCancel(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number> {
    let n = 0;
    for (const e of await this.active()) n += await e.bulkCancel(filter, opts);
    return n;
  }
  async bulkRetry(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number> {
    const mode = await this.mode();
    if (mode === "canonical") return this.canonical.bulkRetry(filter, opts);
    // From mixed on, retried canonical jobs go to queue storage.
    return (await this.qs!.bulkRetry(filter, opts)) + (await this.qs!.retryCanonical(filter, opts));
  }

  pauseQueue(name: string): Promise<void> {
    return this.canonical.pauseQueue(name);
  }
  queuePaused(name: string): Promise<boolean> {
    return this.canonical.queuePaused(name);
  }
  resumeQueue(name: string): Promise<void> {
    return this.canonical.resumeQueue(name);
  }
  async queueKnown(name: string, liveWithinMs?: number): Promise<boolean> {
    for (const e of await this.active()) if (await e.queueKnown(name, liveWithinMs)) return true;
    return false;
  }
  async listQueues(): Promise<QueueInfo[]> {
    const lists = await Promise.all((await this.active()).map((e) => e.listQueues()));
    if (lists.length === 1) return lists[0];
    return mergeBy(
      lists.flat(),
      (q) => q.name,
      (q) => ({ ...q, counts: { ...q.counts }, approximate: [...(q.approximate ?? [])] }),
      (cur, q) => {
        for (const s of JOB_STATES) cur.counts[s] += q.counts[s];
        cur.approximate = [...new Set([...(cur.approximate ?? []), ...(q.approximate ?? [])])];
        cur.paused ||= q.paused;
        cur.oldestAvailableAgeSeconds = maxAge(cur.oldestAvailableAgeSeconds, q.oldestAvailableAgeSeconds);
      },
    );
  }
  async kindCounts(): Promise<KindCounts> {
    const all = await Promise.all((await this.active()).map((e) => e.kindCounts()));
    const byKind = new Map<string, Record<JobState, number>>();
    for (const k of all.flatMap((x) => x.kinds)) {
      const cur = byKind.get(k.kind);
      if (!cur) byKind.set(k.kind, { ...k.counts });
      else for (const s of JOB_STATES) cur[s] += k.counts[s];
    }
    return {
      approximate: all.some((x) => x.approximate),
      kinds: [...byKind].sort(([a], [b]) => (a < b ? -1 : 1)).map(([kind, counts]) => ({ kind, counts })),
    };
  }
  async throughput(minutes: number): Promise<ThroughputPoint[]> {
    const mode = await this.mode();
    // Finished canonical jobs stay readable after the transition, so their completions count until then.
    const engines = mode === "canonical" ? [this.canonical] : [this.canonical, this.qs!];
    const series = await Promise.all(engines.map((e) => e.throughput(minutes)));
    return series[0].map((p, i) => ({
      minute: p.minute,
      completed: series.reduce((a, s) => a + (s[i]?.completed ?? 0), 0),
      failed: series.reduce((a, s) => a + (s[i]?.failed ?? 0), 0),
    }));
  }

  async queueDepths(): Promise<QueueDepth[]> {
    const lists = await Promise.all((await this.active()).map((e) => e.queueDepths()));
    if (lists.length === 1) return lists[0];
    return mergeBy(lists.flat(), (d) => d.queue, (d) => ({ ...d }), (cur, d) => {
      cur.depth += d.depth;
      cur.estimated ||= d.estimated;
      cur.oldestAvailableAgeSeconds = maxAge(cur.oldestAvailableAgeSeconds, d.oldestAvailableAgeSeconds);
    });
  }
  async kindMinute(minute: Date): Promise<KindMinute[]> {
    const mode = await this.mode();
    if (mode === "canonical") return this.canonical.kindMinute(minute);
    // As throughput: canonical's finished jobs count until the transition is over; one aggregate over both.
    return readKindMinute(
      this.db,
      [`${this.names.q}.canonical_finished_attempts`, this.qs!.finishedAttemptsFn],
      minute,
    );
  }

  async registerCallback(item: CallbackRegistration): Promise<string | null> {
    return (await this.ownerOf(item)).registerCallback(item);
  }
  async getCallback(id: string): Promise<CallbackRecord | null> {
    if ((await this.mode()) === "queue_storage") return this.qs!.getCallback(id);
    return (await this.canonical.getCallback(id)) ?? (this.qs ? await this.qs.getCallback(id) : null);
  }
  async listCallbacks(jobId: number): Promise<CallbackRecord[]> {
    await this.current(); // the queue-storage engine exists once the state was read
    const all = await Promise.all(
      (this.qs ? [this.canonical, this.qs] : [this.canonical]).map((e) => e.listCallbacks(jobId)),
    );
    return all.flat().sort((a, b) => +a.createdAt - +b.createdAt);
  }
  async resolveCallback(id: string, action: ResolveAction, args: ResolveArgs): Promise<CallbackResolution> {
    const mode = await this.mode();
    if (mode === "canonical") return this.canonical.resolveCallback(id, action, args);
    if (mode === "mixed" && await this.canonical.getCallback(id)) {
      return this.canonical.resolveCallback(id, action, args);
    }
    return this.qs!.resolveCallback(id, action, args);
  }

  async promote(): Promise<number> {
    let n = 0;
    for (const e of await this.active()) n += await e.promote();
    return n;
  }
  async rescue(rescueAfterMs: number): Promise<MaintainedJob[]> {
    const out: MaintainedJob[] = [];
    for (const e of await this.active()) out.push(...await e.rescue(rescueAfterMs));
    return out;
  }
  async expireCallbacks(): Promise<MaintainedJob[]> {
    const out: MaintainedJob[] = [];
    for (const e of await this.active()) out.push(...await e.expireCallbacks());
    return out;
  }
  async cleanup(retention: Retention): Promise<number> {
    const mode = await this.mode();
    const engines = mode === "canonical" ? [this.canonical] : [this.canonical, this.qs!];
    let n = 0;
    for (const e of engines) n += await e.cleanup(retention);
    await pruneRuntimes(this.db, this.names);
    await pruneProgress(this.db, this.names, Math.max(retention.completed, retention.failed));
    await pruneLimitLog(this.db, this.names);
    return n;
  }
  async refreshStatistics(): Promise<boolean> {
    let any = false;
    for (const e of await this.active()) any = (await e.refreshStatistics()) || any;
    return any;
  }
  async maintainRing(retention: Retention, parkAfterMs: number): Promise<RingReport> {
    const mode = await this.mode();
    if (mode === "canonical") return { rotated: null, pruned: {}, moved: 0 };
    const report = await this.qs!.maintainRing(retention, parkAfterMs);
    if (mode === "mixed") report.adopted = await this.qs!.adoptWaiting();
    return report;
  }

  /** Writes `ctx.progress` values of many jobs in one statement (both engines share the table). */
  writeProgress(items: ProgressItem[]): Promise<void> {
    return writeProgress(this.db, this.names, items);
  }

  abandonedAttempts(): Promise<AbandonedAttemptReport[]> {
    return abandonedAttempts(this.db, this.names);
  }
  upsertRuntime(r: RuntimeReport): Promise<void> {
    return this.canonical.upsertRuntime(r);
  }
  deleteRuntime(id: string): Promise<void> {
    return this.canonical.deleteRuntime(id);
  }
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]> {
    return this.canonical.listRuntimes(liveWithinMs);
  }
  storageState(): Promise<StorageState> {
    return readStorageState(this.db, this.names);
  }
}

/** Items of several engines merged by key (the first one copied, the others added to it), in key order. */
function mergeBy<T>(items: T[], key: (t: T) => string, copy: (t: T) => T, add: (cur: T, t: T) => void): T[] {
  const byKey = new Map<string, T>();
  for (const t of items) {
    const cur = byKey.get(key(t));
    if (cur) add(cur, t);
    else byKey.set(key(t), copy(t));
  }
  return [...byKey].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, t]) => t);
}

/** The older of two ages of the oldest available job (null: none). */
function maxAge(a: number | null, b: number | null): number | null {
  return b === null ? a : Math.max(a ?? 0, b);
}

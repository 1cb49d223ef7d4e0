/**
 * The storage engine interface: the only way the client, the worker runtime, the CLI and the HTTP
 * surfaces reach job storage. Two engines implement it: `canonical` (one jobs table updated in place)
 * and `queue_storage` (append-only ring partitions); `routed.ts` picks between them by the storage
 * state. Every write made on behalf of an attempt carries (job id, run lease): a stale writer changes
 * nothing. docs/reference/storage.md describes both engines.
 */
import type { Db } from "../db/connection.ts";
import type { Job, JobPage, JobState, ListJobsOptions, NewJob, QueueInfo, RuntimeInfo } from "../types.ts";
export type { NewJob } from "../types.ts";
import type { CronStore } from "./shared/cron.ts";
import type { KindMinute, QueueDepth, SampleStore } from "./shared/samples.ts";
export type { KindMinute, KindStat, QueueDepth, SampleRow, SamplesQuery } from "./shared/samples.ts";

/** The retry policy and deadline of a job kind, as the worker that claims it knows them. */
export interface KindPolicy {
  /** The kind's cap on attempts (the job's own max_attempts applies when lower). */
  maxAttempts?: number;
  /** Hard deadline of an attempt, ms. */
  timeoutMs?: number;
  /** Delay before the retry of attempt 1, 2, ... (the last one repeats); absent: the default backoff. */
  delaysMs?: number[];
}

/** What a claim asks for. */
export interface ClaimRequest {
  queue: string;
  /** Most jobs to claim: free slots plus prefetch room. */
  limit: number;
  /** How many of them go to free slots (start now); the rest are prefetched. */
  free: number;
  runtimeId: string;
  /** Per kind; stored with each attempt (the retry policy that applies wherever the attempt ends). */
  policies: Record<string, KindPolicy>;
  /** Kinds of HTTP workers with their callback timeout: the claim registers their callback. */
  callbackTimeoutsMs: Record<string, number>;
  /** How long a prefetched job may wait to start (its claim's deadline is extended by this). */
  prefetchTtlMs: number;
  /**
   * Attempts of this queue whose handler has returned in this process while their outcome is still on its
   * way to the database: a concurrency or per-key limit does not count them (ADR 019). Sent only for a
   * queue whose claims said it counts units (`Claimed.countsUnits`); an engine may ignore it (its count
   * then includes them until their outcome is written).
   */
  ended?: AttemptRef[];
}

/** Why a claim of a limited queue came back short (ADR 019). */
export interface Throttle {
  /** The limit that cut the claim short. */
  limit: "rate" | "concurrency" | "per_key";
  /** Its use after the claim (claims in the current window, for a rate). */
  inUse: number;
  /** The earliest time the limit may have room again (rate); null: when an attempt of the queue ends. */
  retryAt: Date | null;
}

/**
 * The jobs a claim took, in claim order; `throttle` when a limit of the queue cut it short; `countsUnits`
 * when the queue has a concurrency or per-key limit whose count honours `ClaimRequest.ended`.
 */
export type Claimed = Job[] & { throttle?: Throttle; countsUnits?: boolean };

/** An attempt: job id and run lease. */
export interface AttemptRef {
  id: number;
  lease: number;
}

/** How a completion treats the finished job. */
export interface CompleteOptions {
  /** Keep the completed job readable for the retention; false deletes it at completion (`retention.completed: 0`). */
  keepCompleted: boolean;
}

/** An attempt given back to run again `delayMs` later. */
export interface Snooze extends AttemptRef {
  delayMs: number;
}

/** A running attempt parked until its callback resolves. */
export interface Park extends AttemptRef {
  callbackId: string;
}

/** A callback to register for an attempt: its timeout and who resolves it. */
export interface CallbackRegistration extends AttemptRef {
  timeoutMs: number;
  kind: "in_process" | "http";
}

/** The handler of an attempt returned; `result` is stored. */
export interface Completion extends AttemptRef {
  result: unknown;
  /** When the handler started (a held job starts after its claim); absent: the claim's time. */
  startedAt?: Date;
  /**
   * `result` already serialized and checked storable (`checkJsonValue`), so that a batch is built by
   * concatenation; absent: the engine serializes `result`.
   */
  resultJson?: string;
}

/** `{"id":..,"lease":..,<extra fields>,"result":..}` for each completion, as one JSON array text. */
export function completionsJson(items: Completion[], extra?: (c: Completion) => string): string {
  let out = "[";
  for (let i = 0; i < items.length; i++) {
    const c = items[i];
    const result = c.resultJson ?? (c.result === undefined ? "null" : JSON.stringify(c.result) ?? "null");
    const started = c.startedAt ? `,"started_at":"${c.startedAt.toISOString()}"` : "";
    out += `${i ? "," : ""}{"id":${c.id},"lease":${c.lease}${started}${
      extra ? extra(c) : ""
    },"result":${result}}`;
  }
  return out + "]";
}

/** An attempt to park in `waiting_external` until its callback is resolved. */
export interface ParkRequest extends AttemptRef {
  callbackId: string;
}

/** The attempt failed. */
export interface Failure extends AttemptRef {
  /** The error's message. */
  error: string;
  /** The error's detail (a stack, an HTTP answer): stored with the message, cut to 8 KB (`src/job_errors.ts`). */
  stack?: string;
  /** When the handler started; absent: the claim's time. */
  startedAt?: Date;
  /** Fail for good whatever attempts remain. */
  terminal: boolean;
  /** A delay of the failure's own (an HTTP Retry-After); otherwise the delay stored at claim applies. */
  retryDelayMs?: number;
}

/** The outcome of a callback resolution. */
export interface CallbackResolution {
  outcome: "ok" | "not_found" | "not_pending";
  jobId: number | null;
  state: JobState | null;
  timeoutAt: Date | null;
}

/** What a callback resolution asks for. */
export interface ResolveArgs {
  payload?: unknown;
  error?: string;
  retryable?: boolean;
  timeoutSeconds?: number;
}

/** The callback actions. */
export type ResolveAction = "complete" | "resume" | "fail" | "heartbeat";

/** A callback row. */
export interface CallbackRecord {
  id: string;
  jobId: number;
  attempt: number;
  lease: number;
  kind: "in_process" | "http";
  state: "pending" | "completed" | "failed" | "expired" | "superseded";
  resolution: "resumed" | "completed" | null;
  payload: unknown;
  error: string | null;
  deadlineAt: Date;
  createdAt: Date;
  resolvedAt: Date | null;
  /** Requests that named this callback and were refused (bad signature, body, ...). */
  rejectedCount: number;
  /** The last refused request: {status, code, at}. */
  lastRejection: { status: number; code: string; at: string } | null;
}

/** Filter of bulk operations. */
export interface JobFilter {
  state?: JobState | JobState[];
  kind?: string;
  queue?: string;
}

/** A job rescued or expired by the leader. */
export interface MaintainedJob {
  id: number;
  kind: string;
  state: JobState;
  reason: string;
  callbackId?: string | null;
}

/** What the runtime reports of itself in the runtimes table. */
export interface RuntimeReport
  extends Pick<RuntimeInfo, "id" | "hostname" | "pid" | "queues" | "ready" | "leader"> {
  /** Engines it can execute (absent: canonical only, as a process of the older line). */
  engines?: string[];
  health: Record<string, unknown>;
}

/** An attempt a runtime gave up on, as its heartbeat names it. */
export interface AbandonedAttemptReport extends AttemptRef {
  runtimeId: string;
  reason: string;
}

/** Retention of finished jobs, in milliseconds. */
export interface Retention {
  completed: number;
  failed: number;
}

/** Completions and failures finalized in one minute. */
export interface ThroughputPoint {
  /** Start of the minute. */
  minute: Date;
  completed: number;
  failed: number;
}

/** Counts per job kind (`approximate`: counted over a sample). */
export interface KindCounts {
  kinds: { kind: string; counts: Record<JobState, number> }[];
  approximate: boolean;
}

/** The storage state (the engine new writes go to, and the transition). */
export interface StorageState {
  /** `canonical` or `queue_storage`. */
  engine: string;
  /** `canonical`, `prepared`, `mixed_transition` or `active`. */
  transition: string;
  /** The queue-storage schema (schema version 4 on). */
  qsSchema: string | null;
}

/** The leader's ring and history upkeep on queue storage (no-ops on canonical). */
export interface RingReport {
  rotated: number | null;
  /** Outcome per slot that was looked at: pruned, busy, open_attempts, unclaimed, ... */
  pruned: Record<string, string>;
  /** Attempts moved out of the ring because they ran for long. */
  moved: number;
  /** While mixed: canonical jobs moved to queue storage. */
  adopted?: number;
}

/**
 * The worker's hot path: enqueue, claim, and the ends of an attempt. A fake of the worker needs only this
 * (tests/helpers/fake_engine.ts).
 */
export interface AttemptStore {
  readonly name: string;
  /** Inserts jobs through `db` (the pool or the caller's transaction); duplicates come back marked. */
  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]>;
  /**
   * Claims jobs of a queue (none while it is paused; no more than its limits leave, and then `throttle`
   * says which limit cut the claim short).
   */
  claim(req: ClaimRequest): Promise<Claimed>;
  /** Gives held (prefetched) attempts that never started back: their attempt is refunded, their run_at kept. */
  giveBack(items: AttemptRef[]): Promise<number[]>;
  /** Completes attempts in one statement; returns the ids that were still theirs to complete. */
  complete(items: Completion[], opts: CompleteOptions): Promise<number[]>;
  /**
   * Completes one attempt through `db`, the caller's open transaction (`ctx.transaction`): the lease check
   * and the completion commit or roll back with the caller's statements. False: the attempt is no longer
   * current (nothing written). Under READ COMMITTED the check runs in a statement that starts after the
   * closers' lock is held; under REPEATABLE READ or SERIALIZABLE a closure that the snapshot cannot see
   * makes the statement fail with a serialization error (SQLSTATE 40001) instead.
   */
  completeIn(db: Db, item: Completion, opts: CompleteOptions): Promise<boolean>;
  /** Records a failed attempt: `retryable` or `failed`. Null when the attempt was no longer current. */
  fail(item: Failure): Promise<Job | null>;
  /** Gives the attempt back and schedules the job `delayMs` later. */
  snooze(item: Snooze): Promise<boolean>;
  /**
   * Heartbeats in-flight attempts. Canonical only: queue storage has none, since it rescues by runtime, whose
   * own heartbeat keeps its attempts alive.
   */
  heartbeat?(items: AttemptRef[]): Promise<void>;
  /**
   * Parks a running attempt in `waiting_external`, unless its callback is no longer pending. Parks that
   * arrive together share one statement.
   */
  park(item: Park): Promise<boolean>;
  /**
   * The worker writes nothing more for this attempt (it was cancelled or rescued under it, or its outcome
   * could not be written): what the engine keeps per attempt in memory is dropped. Every write above
   * drops it too, so that a worker's per-attempt maps are empty when it is idle.
   */
  forgetAttempt?(a: AttemptRef): void;
  /** How many attempts the engine keeps in memory (per-attempt maps), for tests and leak checks. */
  trackedAttempts?(): number;
}

/** Reads and operator changes: jobs, queues and statistics. */
export interface AdminStore {
  getJob(id: number): Promise<Job | null>;
  listJobs(opts: ListJobsOptions): Promise<JobPage>;
  /**
   * Jobs in `running` (prefetched ones included: no `attemptedAt` yet), at most `limit`: the longest
   * running first, then the prefetched. For the admin UI's "running now"; bounded by LIMIT.
   */
  runningJobs(limit: number): Promise<Job[]>;
  /** Cancels a job that has not finished (throws JobNotFoundError / InvalidStateError). */
  cancel(id: number): Promise<Job>;
  /** Retries a finished job (throws JobNotFoundError / InvalidStateError / UniqueConflictError). */
  retry(id: number): Promise<Job>;
  /**
   * Deletes a finished job (completed, failed or cancelled) with its callbacks; returns it as it was.
   * Throws JobNotFoundError, or InvalidStateError for a job that has not finished.
   */
  deleteJob(id: number): Promise<Job>;
  bulkCancel(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number>;
  bulkRetry(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number>;

  pauseQueue(name: string): Promise<void>;
  /** Whether a queue is paused now. */
  queuePaused(name: string): Promise<boolean>;
  resumeQueue(name: string): Promise<void>;
  /**
   * Whether a queue exists: it has a `queues` row (paused or resumed once), a job, or a runtime
   * heartbeated within `liveWithinMs` (default 90 000) that serves it.
   */
  queueKnown(name: string, liveWithinMs?: number): Promise<boolean>;
  /** Queues with counts by state (estimates labelled in `approximate`). */
  listQueues(): Promise<QueueInfo[]>;
  kindCounts(): Promise<KindCounts>;
  throughput(minutes: number): Promise<ThroughputPoint[]>;
  /** Available jobs per queue (queues with none are left out): an estimate beyond a bound, never a full count. */
  queueDepths(): Promise<QueueDepth[]>;
  /** The attempts that finished in the minute starting at `minute`, per (queue, kind). */
  kindMinute(minute: Date): Promise<KindMinute[]>;
  /** The per-minute samples (shared by both engines; the leader records them, schema version 5 on). */
  readonly samples: SampleStore;
}

/** External callbacks: registered at claim or by `ctx.waitForCallback`, read, and resolved. */
export interface CallbackStore {
  registerCallback(item: CallbackRegistration): Promise<string | null>;
  getCallback(id: string): Promise<CallbackRecord | null>;
  listCallbacks(jobId: number): Promise<CallbackRecord[]>;
  /** Resolves a callback; resolutions that arrive together share one statement and one commit. */
  resolveCallback(id: string, action: ResolveAction, args: ResolveArgs): Promise<CallbackResolution>;
}

/** The leader's duties, and the runtimes' rows. */
export interface MaintenanceStore {
  promote(): Promise<number>;
  rescue(rescueAfterMs: number): Promise<MaintainedJob[]>;
  expireCallbacks(): Promise<MaintainedJob[]>;
  /**
   * Deletes finished jobs past retention (the routed engine also the rows of runtimes dead for an hour, and
   * the limit log's rows older than their queue's window).
   */
  cleanup(retention: Retention): Promise<number>;
  /** Refreshes the planner statistics of the job storage when missing or far behind; whether it did. */
  refreshStatistics(): Promise<boolean>;
  /** Queue storage only (canonical has no ring): rotates and reclaims ring slots, creates and drops history partitions. */
  maintainRing?(retention: Retention, parkAfterMs: number): Promise<RingReport>;

  /**
   * The attempts runtimes gave up on (their outcome could not be written), as their heartbeat names
   * them (`health.abandoned` of the runtimes row); the leader's rescue ends them with `fail`. The
   * runtimes table is shared by both engines: the routed engine (the leader's) and canonical read it;
   * an engine without it has no such attempts to report.
   */
  abandonedAttempts?(): Promise<AbandonedAttemptReport[]>;
  upsertRuntime(r: RuntimeReport): Promise<void>;
  deleteRuntime(id: string): Promise<void>;
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]>;
}

/** The cron schedules and the storage state. */
export interface StateStore {
  /** Cron schedules (shared by both engines; their jobs are enqueued through the routed SQL API). */
  readonly cron: CronStore;

  /** The storage state. */
  storageState(): Promise<StorageState>;
}

/**
 * What the worker's claim loop, executor, job context and completer use: the attempt store, the callbacks,
 * and two reads (a job for `ctx.waitForCallback`, whether a queue is paused). tests/helpers/fake_engine.ts
 * implements this alone.
 */
export type WorkerStore = AttemptStore & CallbackStore & Pick<AdminStore, "getJob" | "queuePaused">;

/**
 * The engine every storage implementation provides, by role: the attempt store the worker needs, the admin
 * store, the callbacks, the maintenance store of the leader, and the cron schedules and storage state.
 */
export interface StorageEngine
  extends AttemptStore, AdminStore, CallbackStore, MaintenanceStore, StateStore {}

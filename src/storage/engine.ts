/**
 * The storage engine interface. The client and the worker runtime talk to storage only through it,
 * so another engine (the append-only `queue_storage` of a later release) slots in without touching them.
 * Every write made on behalf of an attempt carries (job id, run lease): a stale writer changes nothing.
 */
import type { Db } from "../db/connection.ts";
import type { Job, JobPage, JobState, ListJobsOptions, QueueInfo, RuntimeInfo } from "../types.ts";

/** A validated job to insert (see `src/client/enqueue_input.ts`). */
export interface NewJob {
  kind: string;
  queue: string;
  args: Record<string, unknown>;
  priority: number;
  runAt: Date | null;
  maxAttempts: number;
  tags: string[];
  metadata: Record<string, unknown>;
  uniqueKey: string | null;
}

/** The handler of an attempt returned; `result` is stored. */
export interface Completion {
  id: number;
  lease: number;
  result: unknown;
}

/** An attempt to park in `waiting_external` until its callback is resolved. */
export interface ParkRequest {
  id: number;
  lease: number;
  callbackId: string;
}

/** The attempt failed. */
export interface Failure {
  id: number;
  lease: number;
  error: string;
  /** Fail for good whatever attempts remain. */
  terminal: boolean;
  /** Delay before the retry when attempts remain. */
  retryDelayMs: number;
}

/** The outcome of a callback resolution. */
export interface CallbackResolution {
  outcome: "ok" | "not_found" | "not_pending";
  jobId: number | null;
  state: JobState | null;
  timeoutAt: Date | null;
}

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
  health: Record<string, unknown>;
}

/** Retention of finished jobs, in milliseconds. */
export interface Retention {
  completed: number;
  failed: number;
}

/** The engine every storage implementation provides. */
export interface StorageEngine {
  readonly name: string;
  /** Inserts jobs through `db` (the pool or the caller's transaction); duplicates come back marked. */
  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]>;
  /**
   * Claims at most `limit` available jobs of a queue (none when it is paused). Jobs of the kinds in
   * `callbackTimeoutsMs` (HTTP workers) get a callback registered in the same statement.
   */
  claim(
    queue: string,
    limit: number,
    runtimeId: string,
    timeoutsMs: Record<string, number>,
    callbackTimeoutsMs?: Record<string, number>,
  ): Promise<Job[]>;
  /** Completes attempts in one statement; returns the ids that were still theirs to complete. */
  complete(items: Completion[], deleteRows: boolean): Promise<number[]>;
  /** Records a failed attempt: `retryable` or `failed`. Null when the attempt was no longer current. */
  fail(item: Failure): Promise<Job | null>;
  /** Gives the attempt back and schedules the job `delayMs` later. */
  snooze(id: number, lease: number, delayMs: number): Promise<boolean>;
  /** Heartbeats in-flight attempts. */
  heartbeat(items: { id: number; lease: number }[]): Promise<void>;
  /**
   * Parks a running attempt in `waiting_external`, unless its callback is no longer pending. Parks that
   * arrive together share one statement.
   */
  park(id: number, lease: number, callbackId: string): Promise<boolean>;

  getJob(id: number): Promise<Job | null>;
  listJobs(opts: ListJobsOptions): Promise<JobPage>;
  cancel(id: number): Promise<Job | null>;
  retry(id: number): Promise<Job | null>;
  bulkCancel(filter: JobFilter): Promise<number>;
  bulkRetry(filter: JobFilter): Promise<number>;

  pauseQueue(name: string): Promise<void>;
  resumeQueue(name: string): Promise<void>;
  /**
   * Whether a queue exists: it has a `queues` row (paused or resumed once), a job, or a runtime
   * heartbeated within `liveWithinMs` (default 90 000) that serves it.
   */
  queueKnown(name: string, liveWithinMs?: number): Promise<boolean>;
  listQueues(): Promise<QueueInfo[]>;

  registerCallback(
    id: number,
    lease: number,
    timeoutMs: number,
    kind: "in_process" | "http",
  ): Promise<string | null>;
  getCallback(id: string): Promise<CallbackRecord | null>;
  listCallbacks(jobId: number): Promise<CallbackRecord[]>;
  /** Resolves a callback; resolutions that arrive together share one statement and one commit. */
  resolveCallback(
    id: string,
    action: "complete" | "resume" | "fail" | "heartbeat",
    args: { payload?: unknown; error?: string; retryable?: boolean; timeoutSeconds?: number },
  ): Promise<CallbackResolution>;

  promote(): Promise<number>;
  rescue(rescueAfterMs: number): Promise<MaintainedJob[]>;
  expireCallbacks(): Promise<MaintainedJob[]>;
  cleanup(retention: Retention): Promise<number>;
  /** Refreshes the planner statistics of the job storage (jobs, callbacks) when missing or far behind; whether it did. */
  refreshStatistics(): Promise<boolean>;

  upsertRuntime(r: RuntimeReport): Promise<void>;
  deleteRuntime(id: string): Promise<void>;
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]>;

  /** Active engine and transition state from the storage table. */
  storageState(): Promise<{ engine: string; transition: string }>;
}

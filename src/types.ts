/**
 * Public types shared by the client, the worker runtime, the storage engines and the HTTP surfaces.
 *
 * TypeScript records are camelCase; every JSON surface (REST, CLI `--json`, `/readyz`, the function
 * request) is snake_case: see `src/wire.ts` for the conversions.
 */
import type { AnyTasks, TaskArgs, TaskInput, TaskKind } from "./tasks.ts";

/** Every state a job can be in. Terminal: `completed`, `failed`, `cancelled`. */
export type JobState =
  | "scheduled"
  | "available"
  | "running"
  | "waiting_external"
  | "retryable"
  | "completed"
  | "failed"
  | "cancelled";

/** All job states, in lifecycle order. */
export const JOB_STATES: readonly JobState[] = [
  "scheduled",
  "available",
  "running",
  "waiting_external",
  "retryable",
  "completed",
  "failed",
  "cancelled",
];

/** States a job never leaves on its own. */
export const TERMINAL_STATES: readonly JobState[] = ["completed", "failed", "cancelled"];

/** One entry per failed attempt. */
export interface JobError {
  attempt: number;
  /** RFC 3339 time of the failure. */
  at: string;
  /** The error's message. */
  error: string;
  terminal?: boolean;
  /**
   * The error's detail, at most 8 KB: a handler's `Error.stack`, an HTTP function's status and the first
   * bytes of its answer, or what the leader saw when it rescued the attempt. Absent when there is none.
   */
  stack?: string;
}

/**
 * A job as the TypeScript API returns it. `Args` types `args`: an args type, or a task map entry
 * (`Job<Tasks["send_email"]>`: a `Task<Args, Result>` or a schema type gives its args, a schema's output).
 */
export interface Job<Args = Record<string, unknown>> {
  id: number;
  kind: string;
  queue: string;
  args: TaskArgs<Args>;
  state: JobState;
  priority: number;
  attempt: number;
  /** The job's own limit of attempts. */
  maxAttempts: number;
  /**
   * The limit that applied to the latest attempt: the smaller of the job's and its kind's `maxAttempts`,
   * stored when the attempt was claimed (null before the first claim).
   */
  effectiveMaxAttempts: number | null;
  runAt: Date;
  createdAt: Date;
  /**
   * When the latest attempt was claimed (a held, prefetched job too); null before the first claim and after
   * a graceful give-back.
   */
  claimedAt: Date | null;
  /**
   * When the latest attempt's handler started, written with its outcome (the claim time when the worker that
   * held it died). Null while an attempt runs or waits for its callback; inside a handler, this attempt's start.
   */
  attemptedAt: Date | null;
  finalizedAt: Date | null;
  heartbeatAt: Date | null;
  deadlineAt: Date | null;
  errors: JobError[];
  tags: string[];
  metadata: Record<string, unknown>;
  result: unknown;
  uniqueKey: string | null;
  /**
   * The key per-key limits count the job by (the enqueue option `limitKey`, or its kind's `limitKey(args)`);
   * null when it has none. Set at enqueue and kept unchanged through every attempt, retry and snooze.
   */
  limitKey: string | null;
  callbackId: string | null;
  callbackTimeoutAt: Date | null;
  /** Run lease: incremented by every claim; guards every write made on behalf of an attempt. */
  lease: number;
  /** Id of the runtime that made the latest claim. */
  attemptedBy: string | null;
  /** Set on the job returned by enqueue when a unique job with the same key already existed. */
  duplicate?: boolean;
  /** W3C `traceparent` captured at enqueue (on claimed jobs). */
  traceContext?: string | null;
  /** On claimed jobs: claimed into the prefetch buffer (not started yet). */
  prefetched?: boolean;
  /**
   * The latest value the handler of the job's latest attempt reported with `ctx.progress`, and when it was
   * written; absent when it reported none (set by `getJob` and `runningJobs`).
   */
  progress?: JobProgress;
}

/** A progress report of an attempt (`ctx.progress`). */
export interface JobProgress {
  /** The JSON value the handler reported (the latest one wins). */
  value: unknown;
  /** When it was written (values are written at most once a second per job). */
  at: Date;
}

/**
 * The job `enqueue` returns for a task map entry `E`: `Job<E>`, the type a handler of the kind gets; for a
 * schema whose input and output types differ, a job whose args have the input type (as they are stored).
 */
export type EnqueuedJobOf<E> = [TaskInput<E>] extends [TaskArgs<E>]
  ? ([TaskArgs<E>] extends [TaskInput<E>] ? Job<E> : Job<TaskInput<E>>)
  : Job<TaskInput<E>>;

/** Unique-job options: the key is built over kind, plus the parts switched on here. */
export interface UniqueOptions {
  /** Include the args in the key (default true). */
  byArgs?: boolean;
  /** Include the queue in the key (default false). */
  byQueue?: boolean;
  /** Include the time bucket `floor(now / periodMs)` in the key. */
  periodMs?: number;
  /** `return` (default): return the existing job marked `duplicate`; `error`: throw UniqueConflictError. */
  onConflict?: "return" | "error";
}

/** Options of `enqueue`. */
export interface EnqueueOptions {
  queue?: string;
  /** 1 (highest) to 4; default 2. */
  priority?: number;
  runAt?: Date;
  /** 1..1000; default 25. */
  maxAttempts?: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  unique?: UniqueOptions;
  /**
   * The key per-key limits count the job by (a tenant, an account, an API token...): a string of 1 to 255
   * characters. Without it, the kind's `limitKey(args)` of `createClient({ kinds })` gives it, if any.
   * Carried with the job (`job.limitKey`) through every attempt; a queue's `perKey` limit counts by it.
   */
  limitKey?: string;
  /** A postgres.js transaction (or `sql`) of the caller's own: the insert joins it. */
  tx?: any;
  /** W3C `traceparent` of the producer's span (the attempt's span becomes its child). */
  traceparent?: string;
}

/**
 * Options of one job kind for the client (`createClient({ kinds })`), applied when a job of the kind is
 * enqueued. `Args` is what `enqueue` takes as the kind's args (a task map entry's input).
 */
export interface KindOptions<Args = Record<string, unknown>> {
  /**
   * The job's limit key from its args, for an enqueue that gives no `limitKey` of its own; `undefined`
   * for none. Its answer is checked like the option: a string of 1 to 255 characters.
   */
  limitKey?: (args: Args) => string | undefined;
}

/** The `kinds` of a client: options per kind of the task map, each optional. */
export type KindOptionsMap<T extends object = AnyTasks> = {
  [K in TaskKind<T>]?: KindOptions<TaskInput<T[K]>>;
};

/** One job of `enqueueMany`: with a task map, its `args` are checked against its `kind`. */
export type EnqueueItem<T extends object = AnyTasks> = {
  [K in TaskKind<T>]:
    & Omit<EnqueueOptions, "tx">
    & { kind: K }
    & (Partial<TaskInput<T[K]>> extends TaskInput<T[K]> ? { args?: TaskInput<T[K]> }
      : { args: TaskInput<T[K]> });
}[TaskKind<T>];

/** Filter of `listJobs`. */
export interface ListJobsOptions {
  state?: JobState | JobState[];
  kind?: string;
  queue?: string;
  tag?: string;
  /** Text searched for in the args (case-insensitive). */
  q?: string;
  /** Default 100, at most 1000. */
  limit?: number;
  /** Opaque keyset cursor from a previous page's `nextCursor`. */
  cursor?: string;
}

/** A page of `listJobs`. */
export interface JobPage {
  jobs: Job[];
  nextCursor: string | null;
}

// The snake_case JSON objects of the health surfaces live with the other JSON shapes.

/** Per-queue state for admin surfaces. */
export interface QueueInfo {
  name: string;
  paused: boolean;
  counts: Record<JobState, number>;
  /** States whose count is a lower bound (counting them exactly would read a large table). */
  approximate?: JobState[];
  /** Seconds since the oldest available job became due; null when none is available. */
  oldestAvailableAgeSeconds: number | null;
}

/**
 * Fleet-wide limits of a queue, obeyed by every worker process of every deployment (stored in the
 * database). `rate`/`per`: at most `rate` jobs claimed (held ones included) in any window of `per` ms.
 * `concurrency`: at most that many attempts open at once. `perKey`: at most that many attempts open at once
 * per job `limitKey` (queue storage only).
 */
export interface QueueLimit {
  /**
   * At most this many attempts of the queue open at once, fleet-wide: running and held (prefetched) ones,
   * in-process waiters, and HTTP parks with `countParked`. Refused while a storage transition is under way.
   */
  concurrency?: number | null;
  /** At most this many claims in any window of `per` milliseconds, fleet-wide. */
  rate?: number | null;
  /** The rate's window in milliseconds (1 to 86 400 000). */
  per?: number | null;
  /**
   * At most `concurrency` attempts open at once per job `limitKey`, fleet-wide, while jobs of other keys go
   * on; jobs without a key are not limited by it. A job whose key is at its limit when a claim meets it is
   * moved aside (shown as `scheduled`) and comes back to the end of its queue once its key has room. Needs
   * queue storage (refused on canonical and while a storage transition is under way).
   */
  perKey?: { concurrency: number } | null;
  /** Whether an attempt parked for an HTTP callback holds a concurrency unit (default false). */
  countParked?: boolean;
}

/** A queue's stored limits and their current use. */
export interface QueueLimitInfo {
  queue: string;
  concurrency: number | null;
  rate: number | null;
  /** The rate's window in ms. */
  per: number | null;
  perKey: number | null;
  countParked: boolean;
  /**
   * When the rate is enforced from: a rate added to a queue counts claims from the moment it is set and is
   * enforced once a whole window has been counted.
   */
  rateInForceAt: Date | null;
  /**
   * Current use: `rate`, the jobs claimed in the current window (null without a rate); `concurrency`, the
   * attempts open now (null without a concurrency limit); `perKey`, the units each key holds now (keys
   * holding none are left out; null without a per-key limit).
   */
  inUse: { rate: number | null; concurrency: number | null; perKey: Record<string, number> | null };
  /** Who wrote it: `cli`, `api`, `ui`, `sql`, or the id of the worker runtime that seeded it. */
  setBy: string;
  updatedAt: Date;
}

/** A queue of a runtime whose claims a fleet-wide limit cuts short. */
export interface ThrottledQueueInfo {
  queue: string;
  /** The limit: `rate`. */
  limit: string;
  /** Since when its claims have been cut short (ISO 8601). */
  since: string;
}

/** A handler aborted (cancel, deadline, shutdown) that has not returned within the stuck grace. */
export interface StuckHandlerInfo {
  job_id: number;
  lease: number;
  kind: string;
  queue: string;
  /** Why it was aborted: `cancelled`, `deadline` or `shutdown`. */
  reason: string;
  /** When it was aborted (ISO 8601). */
  aborted_at: string;
}

/** A worker process as recorded in the runtimes table. */
export interface RuntimeInfo {
  id: string;
  hostname: string;
  pid: number;
  queues: string[];
  /** Storage engines this runtime can execute. */
  engines: string[];
  ready: boolean;
  leader: boolean;
  startedAt: Date;
  heartbeatAt: Date;
  /** Heartbeated within three heartbeat intervals. */
  live: boolean;
  /** The rescue window it reported (ms): an attempt without a heartbeat for longer is rescued. */
  rescueAfterMs?: number | null;
  /** Attempts it was running at its last heartbeat (as it reported them). */
  inFlight?: number | null;
  /** Jobs it held claimed and not started (prefetched) at its last heartbeat; null when it does not report them. */
  held?: number | null;
  /** Ids of those held jobs (at most 500). */
  heldJobs?: number[];
  /** Aborted handlers that had not returned at its last heartbeat (src/worker/stuck.ts). */
  stuckHandlers?: StuckHandlerInfo[];
  /** Its queues whose last claim a fleet-wide limit cut short, at its last heartbeat. */
  throttled?: ThrottledQueueInfo[];
  /** The kinds it has a handler for (in each of its queues); null when it does not report them. */
  kinds?: string[] | null;
}

/** Anything with the four log methods (console works). */
export interface Logger {
  debug(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  /**
   * A logger whose lines carry these fields (pino's and bunyan's loggers have it; so does svc's JSON
   * logger). Without it, `ctx.logger` puts the job's id, kind and attempt in front of each line instead.
   */
  child?(fields: Record<string, unknown>): Logger;
}

/** Object of `client.healthCheck()` and `svc health --json` (snake_case on purpose). */
export interface ClusterHealth {
  ready: boolean;
  postgres: "connected" | "unreachable";
  schema_version: number | null;
  expected_schema_version: number;
  storage: string;
  storage_transition: string;
  live_runtimes: number;
  unhealthy_runtimes: number;
  /** `transaction` when this connection goes through a transaction pooler, else `none`. */
  pooler: "transaction" | "none";
  /** Why `ready` is false; absent when ready. */
  reason?: string;
}

/** Object of `worker.healthCheck()` and the `/readyz` body (snake_case on purpose). */
export interface ReadinessReport {
  ready: boolean;
  postgres_connected: boolean;
  schema_version: number | null;
  expected_schema_version: number;
  schema_compatible: boolean;
  poll_loop_alive: boolean;
  heartbeat_alive: boolean;
  maintenance_alive: boolean;
  shutting_down: boolean;
  leader: boolean;
  /** `transaction` when the worker's database URL goes through a transaction pooler, else `none`. */
  pooler: "transaction" | "none";
  /** Whether LISTEN wake-ups are active (false: the claim loops poll every `pollInterval`). */
  listening: boolean;
}

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
  /** The unique-key options; the key itself is computed by the database (`unique_key()`). */
  unique: { byArgs: boolean; byQueue: boolean; periodMs: number | null } | null;
  /** W3C traceparent of the producer. */
  traceContext: string | null;
  /** The key per-key limits count the job by; null for none. */
  limitKey: string | null;
}

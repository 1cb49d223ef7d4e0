/**
 * Public types shared by the client, the worker runtime, the storage engines and the HTTP surfaces.
 *
 * TypeScript records are camelCase; every JSON surface (REST, CLI `--json`, `/readyz`, the function
 * request) is snake_case: see `src/wire.ts` for the conversions.
 */

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
  error: string;
  terminal?: boolean;
}

/** A job as the TypeScript API returns it. */
export interface Job {
  id: number;
  kind: string;
  queue: string;
  args: Record<string, unknown>;
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
  attemptedAt: Date | null;
  finalizedAt: Date | null;
  heartbeatAt: Date | null;
  deadlineAt: Date | null;
  errors: JobError[];
  tags: string[];
  metadata: Record<string, unknown>;
  result: unknown;
  uniqueKey: string | null;
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
}

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
  /** A postgres.js transaction (or `sql`) of the caller's own: the insert joins it. */
  tx?: any;
  /** W3C `traceparent` of the producer's span (the attempt's span becomes its child). */
  traceparent?: string;
}

/** One job of `enqueueMany`. */
export interface EnqueueItem extends Omit<EnqueueOptions, "tx"> {
  kind: string;
  args?: Record<string, unknown>;
}

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
export type { ClusterHealth, ReadinessReport } from "./wire.ts";

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
}

/** Anything with the four log methods (console works). */
export interface Logger {
  debug(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

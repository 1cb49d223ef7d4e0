/**
 * The JSON shapes of every JSON surface (REST API, CLI `--json`, `/readyz` and `svc health --json`, the
 * function request, the SQL API's jsonb results) in snake_case: jobs, queues, runtimes, callbacks, cron
 * schedules, the health reports and the function request; and the conversions to and from the camelCase
 * records of the TypeScript API. The job shape is the one the SQL function `job_json` produces, key for
 * key (tests/http/wire_test.ts compares them).
 */
import type { CallbackRecord } from "./storage/engine.ts";
import type { CronSchedule } from "./cron/definition.ts";
import type {
  Job,
  JobState,
  QueueInfo,
  QueueLimitInfo,
  RuntimeInfo,
  StuckHandlerInfo,
  ThrottledQueueInfo,
} from "./types.ts";
export type { ClusterHealth, ReadinessReport } from "./types.ts";
import { readJobErrors } from "./job_errors.ts";

/** RFC 3339 in UTC with milliseconds, or null. */
export function iso(d: Date | string | null | undefined): string | null {
  return d ? new Date(d).toISOString() : null;
}

/** A time from a row (already a Date: kept, not copied) or from JSON text. */
const date = (v: unknown): Date | null =>
  v === null || v === undefined ? null : v instanceof Date ? v : new Date(v as string);

/** The JSON of a job (REST, CLI `--json`, the SQL API's `job_json`). Times are RFC 3339 in UTC. */
export interface JobJson extends
  Pick<
    Job,
    | "id"
    | "kind"
    | "queue"
    | "args"
    | "state"
    | "priority"
    | "attempt"
    | "errors"
    | "tags"
    | "metadata"
    | "result"
  > {
  max_attempts: number;
  /** The limit of attempts that applied to the latest attempt (the kind's own, stored at claim); null before one. */
  effective_max_attempts: number | null;
  run_at: string;
  created_at: string;
  /** When the latest attempt was claimed (held jobs too); null before the first claim. */
  claimed_at: string | null;
  /** When the latest attempt's handler started, written with its outcome; null while an attempt runs. */
  attempted_at: string | null;
  finalized_at: string | null;
  heartbeat_at: string | null;
  deadline_at: string | null;
  unique_key: string | null;
  /** The key per-key limits count the job by; null when it has none. */
  limit_key: string | null;
  callback_id: string | null;
  callback_timeout_at: string | null;
  attempted_by: string | null;
  lease: number;
  /** Present (true) when an enqueue found an unfinished job with the same unique key and returned it. */
  duplicate?: true;
  /** Present when the latest attempt's handler reported progress (`ctx.progress`): the latest value. */
  progress?: { value: unknown; at: string };
}

/** The JSON of a queue. */
export interface QueueJson {
  name: string;
  paused: boolean;
  counts: Record<JobState, number>;
  /** States whose count is a lower bound. */
  approximate: JobState[];
  oldest_available_age_seconds: number | null;
  /** Live runtimes that serve the queue. */
  live_runtimes: number;
  /** Kinds with available jobs here that none of those runtimes has a handler for. */
  unhandled_kinds: string[];
  /** The queue's fleet-wide limits and their use; null without a limits row. */
  limit: QueueLimitJson | null;
}

/** The JSON of a worker process (runtime). */
export interface RuntimeJson
  extends Pick<RuntimeInfo, "id" | "hostname" | "pid" | "queues" | "engines" | "ready" | "leader" | "live"> {
  started_at: string;
  heartbeat_at: string;
  /** The rescue window it reported (ms); null for processes that do not report it. */
  rescue_after_ms: number | null;
  /** Attempts it was running at its last heartbeat. */
  in_flight: number | null;
  /** Jobs it held claimed and not started (prefetched: `running` too) at its last heartbeat. */
  held: number | null;
  /** Ids of those held jobs (at most 500). */
  held_jobs: number[];
  /** Aborted handlers that had not returned within the stuck grace at its last heartbeat. */
  stuck_handlers: StuckHandlerInfo[];
  /** Its queues whose last claim a fleet-wide limit cut short, with the limit and since when. */
  throttled: ThrottledQueueInfo[];
  /** The kinds it has a handler for; null when it does not report them. */
  kinds: string[] | null;
}

/** The JSON of a job's callback (in-process or HTTP). */
export interface CallbackJson {
  id: string;
  attempt: number;
  kind: CallbackRecord["kind"];
  state: CallbackRecord["state"];
  deadline_at: string;
  created_at: string;
  resolved_at: string | null;
  error: string | null;
  /** Refused requests that named this callback (bad signature, bad body, too large). */
  rejected_count: number;
  last_rejection: { status: number; code: string; at: string } | null;
}

/** The JSON of a cron schedule. */
export interface CronJson extends
  Pick<
    CronSchedule,
    "name" | "schedule" | "kind" | "args" | "queue" | "timezone" | "paused" | "priority" | "tags" | "metadata"
  > {
  last_fire_at: string | null;
  next_fire_at: string | null;
  max_attempts: number;
  catch_up: number;
  declared_by: string | null;
  created_at: string;
  updated_at: string;
  synced_at: string;
}

/** The function request body (docs/reference/protocol.md, "The function request"). */
export interface FunctionRequest {
  job_id: number;
  kind: string;
  args: Record<string, unknown>;
  attempt: number;
  max_attempts: number;
  callback_id: string;
  callback_url: string;
  fail_url: string;
  heartbeat_url: string;
}

/** A `Job` as the snake_case JSON every JSON surface uses. */
export function jobToJson(j: Job): JobJson {
  const out: JobJson = {
    id: j.id,
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    state: j.state,
    priority: j.priority,
    attempt: j.attempt,
    max_attempts: j.maxAttempts,
    effective_max_attempts: j.effectiveMaxAttempts,
    run_at: iso(j.runAt)!,
    created_at: iso(j.createdAt)!,
    claimed_at: iso(j.claimedAt),
    attempted_at: iso(j.attemptedAt),
    finalized_at: iso(j.finalizedAt),
    heartbeat_at: iso(j.heartbeatAt),
    deadline_at: iso(j.deadlineAt),
    errors: j.errors,
    tags: j.tags,
    metadata: j.metadata,
    result: j.result,
    unique_key: j.uniqueKey,
    limit_key: j.limitKey,
    callback_id: j.callbackId,
    callback_timeout_at: iso(j.callbackTimeoutAt),
    attempted_by: j.attemptedBy,
    lease: j.lease,
  };
  if (j.duplicate) out.duplicate = true;
  if (j.progress) out.progress = { value: j.progress.value, at: iso(j.progress.at)! };
  return out;
}

/**
 * A job from its snake_case fields: the SQL API's JSON (`get_job`, `list_jobs`, `cancel_job`, `retry_job`)
 * or a row of the jobs table (times as Date or RFC 3339 text). The one way a Job is read from stored fields;
 * a claim's row (queue storage's `claimedJob`) and a job just enqueued (`newJob`, from its input) are the
 * two hot paths that build theirs directly.
 */
export function jobFromJson(o: Record<string, unknown>): Job {
  const job: Job = {
    id: Number(o.id),
    kind: o.kind as string,
    queue: o.queue as string,
    args: (o.args ?? {}) as Record<string, unknown>,
    state: o.state as JobState,
    priority: Number(o.priority),
    attempt: Number(o.attempt),
    maxAttempts: Number(o.max_attempts),
    effectiveMaxAttempts: o.effective_max_attempts === null || o.effective_max_attempts === undefined
      ? null
      : Number(o.effective_max_attempts),
    runAt: date(o.run_at)!,
    createdAt: date(o.created_at)!,
    claimedAt: date(o.claimed_at),
    attemptedAt: date(o.attempted_at),
    finalizedAt: date(o.finalized_at),
    heartbeatAt: date(o.heartbeat_at),
    deadlineAt: date(o.deadline_at),
    errors: readJobErrors(o.errors),
    tags: (o.tags ?? []) as string[],
    metadata: (o.metadata ?? {}) as Record<string, unknown>,
    result: o.result ?? null,
    uniqueKey: (o.unique_key ?? null) as string | null,
    limitKey: (o.limit_key ?? null) as string | null,
    callbackId: (o.callback_id ?? null) as string | null,
    callbackTimeoutAt: date(o.callback_timeout_at),
    lease: Number(o.lease ?? 0),
    attemptedBy: (o.attempted_by ?? null) as string | null,
  };
  if (o.trace_context) job.traceContext = o.trace_context as string;
  if (o.duplicate) job.duplicate = true;
  const p = o.progress as { value?: unknown; at?: string } | null | undefined;
  if (p && typeof p === "object" && typeof p.at === "string") {
    job.progress = { value: p.value ?? null, at: new Date(p.at) };
  }
  return job;
}

/** A queue as JSON, with how live runtimes cover it (none when `coverage` is absent). */
export function queueToJson(
  q: QueueInfo,
  coverage?: { liveRuntimes: number; unhandledKinds: string[] },
  limit?: QueueLimitInfo,
): QueueJson {
  return {
    name: q.name,
    paused: q.paused,
    counts: q.counts,
    approximate: q.approximate ?? [],
    oldest_available_age_seconds: q.oldestAvailableAgeSeconds,
    live_runtimes: coverage?.liveRuntimes ?? 0,
    unhandled_kinds: coverage?.unhandledKinds ?? [],
    limit: limit ? queueLimitToJson(limit) : null,
  };
}

/** A queue's limits as JSON (REST, `svc queue list --json`, `svc queue limit --json`). */
export interface QueueLimitJson {
  concurrency: number | null;
  rate: number | null;
  per_ms: number | null;
  per_key: number | null;
  count_parked: boolean;
  /** When the rate is enforced from (it counts claims from when it was set, for one window first). */
  rate_in_force_at: string | null;
  /**
   * Current use: `rate`, the jobs claimed in the current window; `concurrency`, the attempts open now;
   * `per_key`, the units each key holds now.
   */
  in_use: { rate: number | null; concurrency: number | null; per_key: Record<string, number> | null };
  set_by: string;
  updated_at: string;
}

export function queueLimitToJson(l: QueueLimitInfo): QueueLimitJson {
  return {
    concurrency: l.concurrency,
    rate: l.rate,
    per_ms: l.per,
    per_key: l.perKey,
    count_parked: l.countParked,
    rate_in_force_at: l.rateInForceAt?.toISOString() ?? null,
    in_use: { rate: l.inUse.rate, concurrency: l.inUse.concurrency, per_key: l.inUse.perKey },
    set_by: l.setBy,
    updated_at: l.updatedAt.toISOString(),
  };
}

/** A runtime as JSON. */
export function runtimeToJson(r: RuntimeInfo): RuntimeJson {
  return {
    id: r.id,
    hostname: r.hostname,
    pid: r.pid,
    queues: r.queues,
    engines: r.engines,
    ready: r.ready,
    leader: r.leader,
    started_at: iso(r.startedAt)!,
    heartbeat_at: iso(r.heartbeatAt)!,
    live: r.live,
    rescue_after_ms: r.rescueAfterMs ?? null,
    in_flight: r.inFlight ?? null,
    held: r.held ?? null,
    held_jobs: r.heldJobs ?? [],
    stuck_handlers: r.stuckHandlers ?? [],
    throttled: r.throttled ?? [],
    kinds: r.kinds ?? null,
  };
}

/** A callback as JSON. */
export function callbackToJson(c: CallbackRecord): CallbackJson {
  return {
    id: c.id,
    attempt: c.attempt,
    kind: c.kind,
    state: c.state,
    deadline_at: iso(c.deadlineAt)!,
    created_at: iso(c.createdAt)!,
    resolved_at: iso(c.resolvedAt),
    error: c.error,
    rejected_count: c.rejectedCount,
    last_rejection: c.lastRejection,
  };
}

/** A `CronSchedule` as the snake_case JSON of `svc cron list --json` and `GET /api/cron`. */
export function cronToJson(c: CronSchedule): CronJson {
  return {
    name: c.name,
    schedule: c.schedule,
    kind: c.kind,
    args: c.args,
    queue: c.queue,
    timezone: c.timezone,
    paused: c.paused,
    last_fire_at: iso(c.lastFireAt),
    next_fire_at: iso(c.nextFireAt),
    priority: c.priority,
    max_attempts: c.maxAttempts,
    tags: c.tags,
    metadata: c.metadata,
    catch_up: c.catchUp,
    declared_by: c.declaredBy,
    created_at: iso(c.createdAt)!,
    updated_at: iso(c.updatedAt)!,
    synced_at: iso(c.syncedAt)!,
  };
}

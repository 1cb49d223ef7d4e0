/**
 * The JSON shapes of every JSON surface (REST API, CLI `--json`, the SQL API's jsonb results): jobs,
 * queues, runtimes and callbacks in snake_case, and the conversions to and from the camelCase records
 * of the TypeScript API. The job shape is the one the SQL function `job_json` produces, key for key
 * (a test compares the two).
 */
import type { CallbackRecord } from "./storage/engine.ts";
import type { Job, JobError, JobState, QueueInfo, RuntimeInfo } from "./types.ts";

/** RFC 3339 in UTC with milliseconds, or null. */
export function iso(d: Date | string | null | undefined): string | null {
  return d ? new Date(d).toISOString() : null;
}

const date = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string));

/** A `Job` as the snake_case JSON every JSON surface uses. */
export function jobToJson(j: Job): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: j.id,
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    state: j.state,
    priority: j.priority,
    attempt: j.attempt,
    max_attempts: j.maxAttempts,
    effective_max_attempts: j.effectiveMaxAttempts,
    run_at: iso(j.runAt),
    created_at: iso(j.createdAt),
    attempted_at: iso(j.attemptedAt),
    finalized_at: iso(j.finalizedAt),
    heartbeat_at: iso(j.heartbeatAt),
    deadline_at: iso(j.deadlineAt),
    errors: j.errors,
    tags: j.tags,
    metadata: j.metadata,
    result: j.result,
    unique_key: j.uniqueKey,
    callback_id: j.callbackId,
    callback_timeout_at: iso(j.callbackTimeoutAt),
    attempted_by: j.attemptedBy,
    lease: j.lease,
  };
  if (j.duplicate) out.duplicate = true;
  return out;
}

/** A job from its snake_case JSON (the SQL API's `get_job`, `list_jobs`, `cancel_job`, `retry_job`). */
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
    attemptedAt: date(o.attempted_at),
    finalizedAt: date(o.finalized_at),
    heartbeatAt: date(o.heartbeat_at),
    deadlineAt: date(o.deadline_at),
    errors: (o.errors ?? []) as JobError[],
    tags: (o.tags ?? []) as string[],
    metadata: (o.metadata ?? {}) as Record<string, unknown>,
    result: o.result ?? null,
    uniqueKey: (o.unique_key ?? null) as string | null,
    callbackId: (o.callback_id ?? null) as string | null,
    callbackTimeoutAt: date(o.callback_timeout_at),
    lease: Number(o.lease ?? 0),
    attemptedBy: (o.attempted_by ?? null) as string | null,
  };
  if (o.duplicate) job.duplicate = true;
  return job;
}

/** A queue as JSON. */
export function queueToJson(q: QueueInfo): Record<string, unknown> {
  return {
    name: q.name,
    paused: q.paused,
    counts: q.counts,
    approximate: q.approximate ?? [],
    oldest_available_age_seconds: q.oldestAvailableAgeSeconds,
  };
}

/** A runtime as JSON. */
export function runtimeToJson(r: RuntimeInfo): Record<string, unknown> {
  return {
    id: r.id,
    hostname: r.hostname,
    pid: r.pid,
    queues: r.queues,
    engines: r.engines,
    ready: r.ready,
    leader: r.leader,
    started_at: iso(r.startedAt),
    heartbeat_at: iso(r.heartbeatAt),
    live: r.live,
    rescue_after_ms: r.rescueAfterMs ?? null,
    in_flight: r.inFlight ?? null,
  };
}

/** A callback as JSON. */
export function callbackToJson(c: CallbackRecord): Record<string, unknown> {
  return {
    id: c.id,
    attempt: c.attempt,
    kind: c.kind,
    state: c.state,
    deadline_at: iso(c.deadlineAt),
    created_at: iso(c.createdAt),
    resolved_at: iso(c.resolvedAt),
    error: c.error,
    rejected_count: c.rejectedCount,
    last_rejection: c.lastRejection,
  };
}

/** Row ↔ record conversions for jobs: database rows to camelCase `Job`, `Job` to snake_case JSON. */
import type { Job, JobError } from "../types.ts";
import type { Row } from "../db/connection.ts";

/** A jobs-table row as a `Job`. */
export function rowToJob(r: Row): Job {
  const job: Job = {
    id: Number(r.id),
    kind: r.kind,
    queue: r.queue,
    args: r.args ?? {},
    state: r.state,
    priority: Number(r.priority),
    attempt: Number(r.attempt),
    maxAttempts: Number(r.max_attempts),
    runAt: r.run_at,
    createdAt: r.created_at,
    attemptedAt: r.attempted_at ?? null,
    finalizedAt: r.finalized_at ?? null,
    heartbeatAt: r.heartbeat_at ?? null,
    deadlineAt: r.deadline_at ?? null,
    errors: (r.errors ?? []) as JobError[],
    tags: r.tags ?? [],
    metadata: r.metadata ?? {},
    result: r.result ?? null,
    uniqueKey: r.unique_key ?? null,
    callbackId: r.callback_id ?? null,
    callbackTimeoutAt: r.callback_timeout_at ?? null,
    lease: Number(r.lease),
    attemptedBy: r.attempted_by ?? null,
  };
  if (r.duplicate) job.duplicate = true;
  return job;
}

const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);

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
  };
  if (j.duplicate) out.duplicate = true;
  return out;
}

/** A canonical jobs-table row (or a row of the same columns) as a `Job`. */
import type { Job } from "../types.ts";
import { readJobErrors } from "../job_errors.ts";
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
    effectiveMaxAttempts: r.effective_max_attempts === null || r.effective_max_attempts === undefined
      ? null
      : Number(r.effective_max_attempts),
    runAt: r.run_at,
    createdAt: r.created_at,
    claimedAt: r.claimed_at ?? null,
    attemptedAt: r.attempted_at ?? null,
    finalizedAt: r.finalized_at ?? null,
    heartbeatAt: r.heartbeat_at ?? null,
    deadlineAt: r.deadline_at ?? null,
    errors: readJobErrors(r.errors),
    tags: r.tags ?? [],
    metadata: r.metadata ?? {},
    result: r.result ?? null,
    uniqueKey: r.unique_key ?? null,
    callbackId: r.callback_id ?? null,
    callbackTimeoutAt: r.callback_timeout_at ?? null,
    lease: Number(r.lease),
    attemptedBy: r.attempted_by ?? null,
  };
  if (r.trace_context) job.traceContext = r.trace_context;
  if (r.duplicate) job.duplicate = true;
  return job;
}

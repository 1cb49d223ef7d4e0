/** Enqueue: the input rows of the routed insert, and the Job of a row just inserted. */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { NewJob } from "../engine.ts";
import { jobFromJson } from "../../wire.ts";

/** The input rows of an enqueue statement. */
export function enqueueJson(jobs: NewJob[]): string {
  return JSON.stringify(jobs.map((j) => ({
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    priority: j.priority,
    run_at: j.runAt ? j.runAt.toISOString() : null,
    max_attempts: j.maxAttempts,
    tags: j.tags,
    metadata: j.metadata,
    unique: j.unique &&
      { by_args: j.unique.byArgs, by_queue: j.unique.byQueue, period_ms: j.unique.periodMs },
    trace_context: j.traceContext,
  })));
}

/**
 * Inserts jobs through the routed SQL function `enqueue_jobs` (one statement; the storage state is read in
 * it, so the route is right even across a transition step). Duplicates come back marked, as the job that
 * holds the key.
 */
export async function enqueueJobs(db: Db, n: SchemaNames, jobs: NewJob[]): Promise<Job[]> {
  if (jobs.length === 0) return [];
  const rows = await db.query(`select * from ${n.q}.enqueue_jobs($1::text::jsonb)`, [enqueueJson(jobs)]);
  rows.sort((a, b) => a.ord - b.ord);
  return rows.map((
    r,
    i,
  ) => (r.duplicate ? { ...jobFromJson(r.existing), duplicate: true } : newJob(jobs[i], r)));
}

/** The Job of a row just inserted, from its input and the columns the database decided. */
export function newJob(j: NewJob, r: Row): Job {
  return {
    id: Number(r.id),
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    state: r.state,
    priority: j.priority,
    attempt: 0,
    maxAttempts: j.maxAttempts,
    effectiveMaxAttempts: null,
    runAt: new Date(r.run_at),
    createdAt: new Date(r.created_at),
    claimedAt: null,
    attemptedAt: null,
    finalizedAt: null,
    heartbeatAt: null,
    deadlineAt: null,
    errors: [],
    tags: j.tags,
    metadata: j.metadata,
    result: null,
    uniqueKey: r.unique_key ?? null,
    callbackId: null,
    callbackTimeoutAt: null,
    lease: 0,
    attemptedBy: null,
  };
}

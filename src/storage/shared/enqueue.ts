/** Enqueue: the input rows of the routed insert, and the Job of a row just inserted. */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { NewJob } from "../engine.ts";
import { jobFromJson } from "../../wire.ts";

/**
 * The input rows of an enqueue statement, as JSON: the fields a job leaves at their defaults (queue
 * `default`, priority 2, 25 attempts, no run time, no tags, no metadata, no uniqueness, no trace, no limit
 * key) are left out, and the database fills them in.
 */
export function enqueueJson(jobs: NewJob[]): string {
  return JSON.stringify(jobs.map((j) => {
    const row: Record<string, unknown> = { kind: j.kind, args: j.args };
    if (j.queue !== "default") row.queue = j.queue;
    if (j.priority !== 2) row.priority = j.priority;
    if (j.maxAttempts !== 25) row.max_attempts = j.maxAttempts;
    if (j.runAt) row.run_at = j.runAt.toISOString();
    if (j.tags.length) row.tags = j.tags;
    if (Object.keys(j.metadata).length) row.metadata = j.metadata;
    if (j.unique) {
      row.unique = { by_args: j.unique.byArgs, by_queue: j.unique.byQueue, period_ms: j.unique.periodMs };
    }
    if (j.traceContext) row.trace_context = j.traceContext;
    if (j.limitKey !== null) row.limit_key = j.limitKey;
    return row;
  }));
}

/**
 * Inserts jobs through the routed SQL function `enqueue_batch` (one statement; the storage state is read in
 * it, so the route is right even across a transition step). It answers one row: the ids in input order, the
 * time of the insert, the unique keys the database computed, and the jobs that hold the keys of duplicates;
 * the rest of each job is its input. Duplicates come back marked, as the job that holds the key.
 */
export async function enqueueJobs(db: Db, n: SchemaNames, jobs: NewJob[]): Promise<Job[]> {
  if (jobs.length === 0) return [];
  const [r] = await db.query(`select * from ${n.q}.enqueue_batch($1::text::json)`, [enqueueJson(jobs)]);
  const createdAt = new Date(r.created_at);
  const ids = r.ids as (string | number | null)[];
  const keys = r.keys as (string | null)[] | null;
  const dups = new Map<number, Row>();
  for (const d of (r.dups ?? []) as { ord: number; existing: Row }[]) dups.set(d.ord, d.existing);
  return jobs.map((j, i) => {
    const existing = dups.get(i);
    if (existing) return { ...jobFromJson(existing), duplicate: true };
    return newJob(j, {
      id: ids[i],
      // As the database decides it: due later than the insert's time is scheduled.
      state: j.runAt && j.runAt > createdAt ? "scheduled" : "available",
      run_at: j.runAt ?? createdAt,
      created_at: createdAt,
      unique_key: keys?.[i] ?? null,
    });
  });
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
    limitKey: j.limitKey,
    callbackId: null,
    callbackTimeoutAt: null,
    lease: 0,
    attemptedBy: null,
  };
}

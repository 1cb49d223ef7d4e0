/** Inserts jobs in one statement; unique conflicts come back as the existing job, marked duplicate. */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { NewJob } from "../engine.ts";
import { rowToJob } from "../job_row.ts";

const NON_TERMINAL = `('scheduled', 'available', 'running', 'waiting_external', 'retryable')`;

/** The input rows of an enqueue statement (both engines read this JSON). */
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

export async function enqueueJobs(db: Db, n: SchemaNames, jobs: NewJob[]): Promise<Job[]> {
  if (jobs.length === 0) return [];
  // NOTIFY the queues that got available jobs: delivered at commit (so a caller's transaction that
  // rolls back wakes nobody), deduplicated per transaction. Only the columns the database decides come
  // back; the rest of each Job is the input (sending args back costs a fifth of the throughput).
  // The unique key is computed by the database (`unique_key()`, the one definition).
  const anyKey = jobs.some((j) => j.unique !== null);
  const rows = await db.query(
    `with inp as (
       select i.*, coalesce(i.run_at, now()) as due,
              case when i."unique" is not null then ${n.q}.opts_unique_key(i.kind, i.args, i.queue,
                coalesce(i.run_at, now()), jsonb_build_object('unique', i."unique")) end as unique_key
         from rows from (jsonb_to_recordset($1::text::jsonb) as (kind text, queue text, args jsonb, priority smallint,
              run_at timestamptz, max_attempts integer, tags text[], metadata jsonb, "unique" jsonb,
              trace_context text)) with ordinality
              as i(kind, queue, args, priority, run_at, max_attempts, tags, metadata, "unique", trace_context, ord)),
     ins as (
     insert into ${n.q}.jobs (kind, queue, args, state, priority, run_at, max_attempts, tags, metadata, unique_key,
                              trace_context)
     select i.kind, i.queue, i.args,
            case when i.due > now() then 'scheduled' else 'available' end::${n.q}.job_state,
            i.priority, i.due, i.max_attempts, i.tags, i.metadata, i.unique_key, i.trace_context
       from inp i order by i.ord
     ${
      anyKey
        ? `on conflict (unique_key) where unique_key is not null and state in ${NON_TERMINAL} do nothing`
        : ""
    }
     returning id, state, queue, run_at, created_at, unique_key),
     woken as (select pg_notify($2, q.queue)::text from (select distinct queue from ins where state = 'available') q)
     select 0 as part, ins.id as at, ins.id, ins.state, ins.run_at, ins.created_at, ins.unique_key,
            (select count(*) from woken) as woken
       from ins
     union all
     select 1, inp.ord, null, null, null, null, inp.unique_key, null from inp where inp.unique_key is not null
     order by 1, 2`,
    [enqueueJson(jobs), n.jobsChannel],
  );
  const inserted = rows.filter((r) => r.part === 0);
  // The keys of the unique jobs in input order (computed by the database).
  const keys = rows.filter((r) => r.part === 1).map((r) => r.unique_key as string);
  const insertedKeys = new Set(inserted.map((r) => r.unique_key as string | null).filter((k) => k !== null));
  const missingKeys = keys.filter((k) => !insertedKeys.has(k));
  const existing = missingKeys.length === 0 ? [] : await db.query(
    `select * from ${n.q}.jobs where unique_key = any($1::text[]) and state in ${NON_TERMINAL}`,
    [missingKeys],
  );
  const byKey = new Map(existing.map((r) => [r.unique_key as string, rowToJob(r)]));
  // The inserted rows keep input order (ids are drawn in select order); a duplicate takes no id.
  const out: Job[] = [];
  let next = 0;
  let nextKey = 0;
  for (const j of jobs) {
    const key = j.unique ? keys[nextKey++] : null;
    if (key !== null && (!insertedKeys.has(key) || byKey.has(key))) {
      const dup = byKey.get(key);
      if (!dup) throw new Error(`unique job ${key} conflicted but could not be read back; retry the enqueue`);
      out.push({ ...dup, duplicate: true });
      continue;
    }
    const r = inserted[next++];
    const job = newJob(j, r);
    if (key !== null) byKey.set(key, job); // a second copy later in this batch is its duplicate
    out.push(job);
  }
  return out;
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

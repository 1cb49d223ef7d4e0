/** Inserts jobs in one statement; unique conflicts come back as the existing job, marked duplicate. */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { NewJob } from "../engine.ts";
import { rowToJob } from "../job_row.ts";

const NON_TERMINAL = `('scheduled', 'available', 'running', 'waiting_external', 'retryable')`;

export async function enqueueJobs(db: Db, n: SchemaNames, jobs: NewJob[]): Promise<Job[]> {
  if (jobs.length === 0) return [];
  const input = jobs.map((j) => ({
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    priority: j.priority,
    run_at: j.runAt ? j.runAt.toISOString() : null,
    max_attempts: j.maxAttempts,
    tags: j.tags,
    metadata: j.metadata,
    unique_key: j.uniqueKey,
  }));
  // NOTIFY the queues that got available jobs: delivered at commit (so a caller's transaction that
  // rolls back wakes nobody), deduplicated per transaction. Only the columns the database decides come
  // back; the rest of each Job is the input (sending args back costs a fifth of the throughput).
  const anyKey = jobs.some((j) => j.uniqueKey !== null);
  const rows = await db.query(
    `with ins as (
     insert into ${n.q}.jobs (kind, queue, args, state, priority, run_at, max_attempts, tags, metadata, unique_key)
     select i.kind, i.queue, i.args::jsonb,
            case when i.run_at > now() then 'scheduled' else 'available' end::${n.q}.job_state,
            i.priority, coalesce(i.run_at, now()), i.max_attempts, i.tags, i.metadata::jsonb, i.unique_key
       from json_to_recordset($1::text::json) as i(kind text, queue text, args json, priority smallint,
            run_at timestamptz, max_attempts integer, tags text[], metadata json, unique_key text)
     ${
      anyKey
        ? `on conflict (unique_key) where unique_key is not null and state in ${NON_TERMINAL} do nothing`
        : ""
    }
     returning id, state, queue, run_at, created_at, unique_key),
     woken as (select pg_notify($2, q.queue)::text from (select distinct queue from ins where state = 'available') q)
     select ins.id, ins.state, ins.run_at, ins.created_at, ins.unique_key, (select count(*) from woken) as woken
       from ins order by ins.id`,
    [JSON.stringify(input), n.jobsChannel],
  );
  const insertedKeys = new Set(rows.map((r) => r.unique_key as string | null).filter((k) => k !== null));
  const missingKeys = rows.length === jobs.length
    ? []
    : jobs.map((j) => j.uniqueKey).filter((k): k is string => k !== null && !insertedKeys.has(k));
  const existing = missingKeys.length === 0 ? [] : await db.query(
    `select * from ${n.q}.jobs where unique_key = any($1::text[]) and state in ${NON_TERMINAL}`,
    [missingKeys],
  );
  const byKey = new Map(existing.map((r) => [r.unique_key as string, rowToJob(r)]));
  // The inserted rows keep input order (ids are drawn in select order); a duplicate takes no id.
  const out: Job[] = [];
  let next = 0;
  for (const j of jobs) {
    const key = j.uniqueKey;
    if (key !== null && (!insertedKeys.has(key) || byKey.has(key))) {
      const dup = byKey.get(key);
      if (!dup) throw new Error(`unique job ${key} conflicted but could not be read back; retry the enqueue`);
      out.push({ ...dup, duplicate: true });
      continue;
    }
    const r = rows[next++];
    const job = newJob(j, r);
    if (key !== null) byKey.set(key, job); // a second copy later in this batch is its duplicate
    out.push(job);
  }
  return out;
}

/** The Job of a row just inserted, from its input and the columns the database decided. */
function newJob(j: NewJob, r: Row): Job {
  return {
    id: Number(r.id),
    kind: j.kind,
    queue: j.queue,
    args: j.args,
    state: r.state,
    priority: j.priority,
    attempt: 0,
    maxAttempts: j.maxAttempts,
    runAt: r.run_at,
    createdAt: r.created_at,
    attemptedAt: null,
    finalizedAt: null,
    heartbeatAt: null,
    deadlineAt: null,
    errors: [],
    tags: j.tags,
    metadata: j.metadata,
    result: null,
    uniqueKey: j.uniqueKey,
    callbackId: null,
    callbackTimeoutAt: null,
    lease: 0,
    attemptedBy: null,
  };
}

/**
 * The progress of attempts (`ctx.progress`), in `attempt_progress` of the main schema for both engines: one
 * row per job with the latest value and the lease of the attempt that wrote it. A row shows only while its
 * lease is the job's (the attempt running, or the latest one when the job has finished).
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job, JobProgress } from "../../types.ts";

/** A value to write: the job's attempt and the value as checked JSON text. */
export interface ProgressItem {
  id: number;
  lease: number;
  json: string;
  at: Date;
}

/** Writes progress values in one statement; a value of an older attempt never replaces a newer one's. */
export async function writeProgress(db: Db, n: SchemaNames, items: ProgressItem[]): Promise<void> {
  if (items.length === 0) return;
  let body = "[";
  items.forEach((it, i) => {
    body += `${
      i ? "," : ""
    }{"job_id":${it.id},"lease":${it.lease},"at":"${it.at.toISOString()}","value":${it.json}}`;
  });
  await db.query(
    `insert into ${n.q}.attempt_progress as p (job_id, lease, value, at)
     select x.job_id, x.lease, x.value, x.at
       from jsonb_to_recordset($1::text::jsonb) as x(job_id bigint, lease integer, value jsonb, at timestamptz)
     on conflict (job_id) do update set lease = excluded.lease, value = excluded.value, at = excluded.at
      where p.lease <= excluded.lease`,
    [body + "]"],
  );
}

/** The progress of these jobs' latest attempts, by job id (one statement). */
export async function readProgress(db: Db, n: SchemaNames, jobs: Job[]): Promise<Map<number, JobProgress>> {
  const out = new Map<number, JobProgress>();
  if (jobs.length === 0) return out;
  const rows = await db.query(
    `select job_id, lease, value, at from ${n.q}.attempt_progress where job_id = any($1::bigint[])`,
    [jobs.map((j) => j.id)],
  );
  const lease = new Map(jobs.map((j) => [j.id, j.lease]));
  for (const r of rows) {
    const id = Number(r.job_id);
    if (lease.get(id) === Number(r.lease)) out.set(id, { value: r.value, at: new Date(r.at) });
  }
  return out;
}

/** The jobs with their progress set (where their latest attempt reported some). */
export async function withProgress(db: Db, n: SchemaNames, jobs: Job[]): Promise<Job[]> {
  const found = await readProgress(db, n, jobs.filter((j) => j.attempt > 0));
  for (const j of jobs) {
    const p = found.get(j.id);
    if (p) j.progress = p;
  }
  return jobs;
}

/** Deletes progress older than `olderThanMs` (the leader's cleanup); returns how many rows went. */
export async function pruneProgress(db: Db, n: SchemaNames, olderThanMs: number): Promise<number> {
  const rows = await db.query(
    `with d as (delete from ${n.q}.attempt_progress where at < now() - $1::bigint * interval '1 millisecond' returning 1)
     select count(*)::int as n from d`,
    [Math.max(0, Math.round(olderThanMs))],
  );
  return Number(rows[0].n);
}

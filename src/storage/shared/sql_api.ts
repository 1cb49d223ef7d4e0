/**
 * The stable SQL API of the svc schema (`get_job`, `list_jobs`, `cancel_job`, `retry_job`,
 * `resolve_callback`, `health`): SQL functions that route by the storage state, so one definition
 * serves both engines, the TypeScript client and other languages. Their errors carry SQLSTATE P0001 and
 * the REST code in HINT; `apiError` turns them into the library's errors.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { InvalidStateError, JobNotFoundError, UniqueConflictError, ValidationError } from "../../errors.ts";
import type { Job, JobPage, ListJobsOptions } from "../../types.ts";
import { jobFromJson } from "../../wire.ts";

/** The library's error for an error raised by the SQL API; other errors as they are. */
export function apiError(e: unknown, id?: number): unknown {
  const err = e as { code?: string; hint?: string; message?: string };
  if (err?.code !== "P0001") return e;
  switch (err.hint) {
    case "job_not_found":
      return new JobNotFoundError(id ?? 0);
    case "invalid_state":
      return new InvalidStateError(err.message ?? "invalid state");
    case "unique_conflict":
      return new UniqueConflictError(id ?? 0, err.message ?? "");
    case "invalid_request":
      return new ValidationError(err.message ?? "invalid request");
    default:
      return e;
  }
}

async function call<T>(p: Promise<T>, id?: number): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw apiError(e, id);
  }
}

export async function getJob(db: Db, n: SchemaNames, id: number): Promise<Job | null> {
  const [r] = await db.query(`select ${n.q}.get_job($1) as j`, [id]);
  return r?.j ? jobFromJson(r.j) : null;
}

export async function listJobs(db: Db, n: SchemaNames, o: ListJobsOptions): Promise<JobPage> {
  const filter = {
    state: o.state,
    kind: o.kind,
    queue: o.queue,
    tag: o.tag,
    q: o.q,
    limit: o.limit === undefined ? undefined : Math.floor(o.limit),
    cursor: o.cursor,
  };
  const [r] = await call(db.query(`select ${n.q}.list_jobs($1::text::jsonb) as p`, [JSON.stringify(filter)]));
  return {
    jobs: (r.p.jobs as Record<string, unknown>[]).map(jobFromJson),
    nextCursor: r.p.next_cursor ?? null,
  };
}

/**
 * At most `limit` rows of `source` (a relation with the jobs table's columns, filtered to running jobs),
 * the longest claimed first. Held (prefetched) jobs are running too: their attempt was counted at claim,
 * and nothing is written when a held job starts (its worker's runtime report says how many it holds).
 */
export async function runningJobs(db: Db, source: string, limit: number): Promise<Job[]> {
  const rows = await db.query(
    `select * from ${source} order by claimed_at asc nulls last, id limit $1`,
    [Math.max(0, Math.floor(limit))],
  );
  return rows.map(jobFromJson);
}

export async function cancelJob(db: Db, n: SchemaNames, id: number): Promise<Job> {
  const [r] = await call(db.query(`select ${n.q}.cancel_job($1) as j`, [id]), id);
  return jobFromJson(r.j);
}

export async function retryJob(db: Db, n: SchemaNames, id: number): Promise<Job> {
  const [r] = await call(db.query(`select ${n.q}.retry_job($1) as j`, [id]), id);
  return jobFromJson(r.j);
}

/** The SQL API's `health(expected_version, live_ms)`: the cluster's health object as `svc health --json` reports it. */
export async function clusterHealthRow(
  db: Db,
  n: SchemaNames,
  expectedVersion: number,
  liveMs: number,
): Promise<Record<string, unknown>> {
  const [r] = await db.query(`select ${n.q}.health($1, $2) as h`, [expectedVersion, liveMs]);
  return r.h;
}

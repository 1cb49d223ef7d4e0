/** Reading jobs and the admin changes: get, list (keyset), cancel, retry, bulk by filter. */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { type Job, JOB_STATES, type JobPage, type ListJobsOptions } from "../../types.ts";
import { ValidationError } from "../../errors.ts";
import type { JobFilter } from "../engine.ts";
import { rowToJob } from "../job_row.ts";

const TERMINAL = `('completed', 'failed', 'cancelled')`;

export async function getJob(db: Db, n: SchemaNames, id: number): Promise<Job | null> {
  const rows = await db.query(`select * from ${n.q}.jobs where id = $1`, [id]);
  return rows.length ? rowToJob(rows[0]) : null;
}

/** Builds `where` clauses for a filter; returns the SQL and its parameters. */
function filterSql(f: JobFilter & { tag?: string; q?: string }, params: unknown[]): string[] {
  const where: string[] = [];
  if (f.state !== undefined) {
    // Inlined as literals (each checked against the fixed list of states), so the planner sees the
    // values: with the (state, id) index a rare state's newest jobs come back without a table scan.
    const states = Array.isArray(f.state) ? f.state : [f.state];
    for (const st of states) {
      if (!JOB_STATES.includes(st)) {
        throw new ValidationError(
          `unknown job state ${JSON.stringify(st)}: use one of ${JOB_STATES.join(", ")}`,
        );
      }
    }
    where.push(states.length ? `state in (${states.map((st) => `'${st}'`).join(", ")})` : "false");
  }
  if (f.kind) {
    params.push(f.kind);
    where.push(`kind = $${params.length}`);
  }
  if (f.queue) {
    params.push(f.queue);
    where.push(`queue = $${params.length}`);
  }
  if (f.tag) {
    params.push([f.tag]);
    where.push(`tags @> $${params.length}::text[]`);
  }
  if (f.q) {
    params.push(`%${f.q.replace(/[\\%_]/g, (c) => "\\" + c)}%`);
    where.push(`args::text ilike $${params.length}`);
  }
  return where;
}

export async function listJobs(db: Db, n: SchemaNames, o: ListJobsOptions): Promise<JobPage> {
  const limit = Math.min(Math.max(1, Math.floor(o.limit ?? 100)), 1000);
  const params: unknown[] = [];
  const where = filterSql(o, params);
  if (o.cursor) {
    const before = decodeCursor(o.cursor);
    params.push(before);
    where.push(`id < $${params.length}`);
  }
  params.push(limit + 1);
  const rows = await db.query(
    `select * from ${n.q}.jobs ${where.length ? "where " + where.join(" and ") : ""}
      order by id desc limit $${params.length}`,
    params,
  );
  const jobs = rows.slice(0, limit).map(rowToJob);
  const nextCursor = rows.length > limit ? encodeCursor(jobs[jobs.length - 1].id) : null;
  return { jobs, nextCursor };
}

/** Raised for a cursor that did not come from a previous page. */
export class InvalidCursorError extends Error {
  constructor() {
    super("invalid cursor: pass the next_cursor of a previous page, or omit it for the first page");
    this.name = "InvalidCursorError";
  }
}

function encodeCursor(id: number): string {
  return btoa(`id:${id}`).replace(/=+$/, "");
}

function decodeCursor(c: string): number {
  try {
    const m = /^id:(\d+)$/.exec(atob(c));
    if (m) return Number(m[1]);
  } catch { /* fall through */ }
  throw new InvalidCursorError();
}

export async function cancelJob(db: Db, n: SchemaNames, id: number): Promise<Job | null> {
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'cancelled', finalized_at = now(), heartbeat_at = null, deadline_at = null
        where id = $1 and state not in ${TERMINAL} returning *)
     select upd.*, pg_notify($2, upd.id::text)::text as notified from upd`,
    [id, n.cancelChannel],
  );
  return rows.length ? rowToJob(rows[0]) : null;
}

export async function retryJob(db: Db, n: SchemaNames, id: number): Promise<Job | null> {
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'available', attempt = 0, run_at = now(), finalized_at = null,
              callback_id = null, callback_timeout_at = null
        where id = $1 and state in ${TERMINAL} returning *)
     select upd.*, pg_notify($2, upd.queue)::text as notified from upd`,
    [id, n.jobsChannel],
  );
  return rows.length ? rowToJob(rows[0]) : null;
}

export async function bulkCancel(db: Db, n: SchemaNames, f: JobFilter): Promise<number> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  params.push(n.cancelChannel);
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'cancelled', finalized_at = now(), heartbeat_at = null, deadline_at = null
        where state not in ${TERMINAL} ${where.length ? "and " + where.join(" and ") : ""} returning id)
     select count(*) as n, count(pg_notify($${params.length}, id::text)::text) from upd`,
    params,
  );
  return Number(rows[0].n);
}

export async function bulkRetry(db: Db, n: SchemaNames, f: JobFilter): Promise<number> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  params.push(n.jobsChannel);
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'available', attempt = 0, run_at = now(), finalized_at = null,
              callback_id = null, callback_timeout_at = null
        where state in ${TERMINAL} ${where.length ? "and " + where.join(" and ") : ""} returning queue)
     select (select count(*) from upd) as n,
            (select count(pg_notify($${params.length}, queue)::text) from (select distinct queue from upd) q) as notified`,
    params,
  );
  return Number(rows[0].n);
}

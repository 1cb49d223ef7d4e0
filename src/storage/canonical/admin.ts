/** Admin changes on the jobs table: bulk cancel and retry by filter (or count them: dry run), delete. */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { JOB_STATES, TERMINAL_STATES } from "../../types.ts";
import { ValidationError } from "../../errors.ts";
import type { Job } from "../../types.ts";
import { notDeletable } from "../shared/delete.ts";
import type { JobFilter } from "../engine.ts";
import { jobFromJson } from "../../wire.ts";

const TERMINAL = `(${TERMINAL_STATES.map((s) => `'${s}'`).join(", ")})`;

/** Builds `where` clauses for a filter; returns the SQL and its parameters. */
function filterSql(f: JobFilter, params: unknown[]): string[] {
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
  return where;
}

export async function bulkCancel(db: Db, n: SchemaNames, f: JobFilter, dryRun = false): Promise<number> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  const cond = `state not in ${TERMINAL} ${where.length ? "and " + where.join(" and ") : ""}`;
  if (dryRun) {
    return Number((await db.query(`select count(*) as n from ${n.q}.jobs where ${cond}`, params))[0].n);
  }
  params.push(n.abortChannel);
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'cancelled', finalized_at = now(), heartbeat_at = null, deadline_at = null,
              attempted_at = case when state in ('running', 'waiting_external') then coalesce(attempted_at, claimed_at)
                                  else attempted_at end
        where ${cond} returning id)
     select count(*) as n, count(pg_notify($${params.length}, id::text)::text) from upd`,
    params,
  );
  return Number(rows[0].n);
}

export async function bulkRetry(db: Db, n: SchemaNames, f: JobFilter, dryRun = false): Promise<number> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  const cond = `state in ${TERMINAL} ${where.length ? "and " + where.join(" and ") : ""}`;
  if (dryRun) {
    return Number((await db.query(`select count(*) as n from ${n.q}.jobs where ${cond}`, params))[0].n);
  }
  params.push(n.jobsChannel);
  const rows = await db.query(
    `with upd as (
       update ${n.q}.jobs set state = 'available', attempt = 0, run_at = now(), finalized_at = null,
              callback_id = null, callback_timeout_at = null, effective_max_attempts = null, retry_delay_ms = null
        where ${cond} returning queue)
     select (select count(*) from upd) as n,
            (select count(pg_notify($${params.length}, queue)::text) from (select distinct queue from upd) q) as notified`,
    params,
  );
  return Number(rows[0].n);
}

/** Deletes a finished job; its callbacks go with it (foreign key, on delete cascade). */
export async function deleteJob(db: Db, n: SchemaNames, id: number): Promise<Job> {
  const rows = await db.query(`delete from ${n.q}.jobs where id = $1 and state in ${TERMINAL} returning *`, [
    id,
  ]);
  if (rows.length) return jobFromJson(rows[0]);
  const [r] = await db.query(`select state from ${n.q}.jobs where id = $1`, [id]);
  throw notDeletable(id, r?.state ?? null);
}

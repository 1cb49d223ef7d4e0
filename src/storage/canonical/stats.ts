/**
 * The dashboard's read queries: counts by state, by kind, and completions/failures per minute.
 * Each is shaped for the indexes of the jobs table (see bench/dashboard_queries.ts for timings
 * with 1,000,000 jobs):
 * - counts by state: an index-only scan of `jobs_state_id_idx` per state (no heap visits once
 *   the table is vacuumed);
 * - throughput: a range scan of the partial index `jobs_finalized_idx (state, finalized_at)` over
 *   the last hour only.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { JOB_STATES, type JobState } from "../../types.ts";

/** A count for every job state (zeros included). */
export type StateCounts = Record<JobState, number>;

/** Completions and failures finalized in one minute. */
export interface ThroughputPoint {
  /** Start of the minute. */
  minute: Date;
  completed: number;
  failed: number;
}

function fillCounts(rows: { state: string; n: unknown }[]): StateCounts {
  const out = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as StateCounts;
  for (const r of rows) if (r.state in out) out[r.state as JobState] = Number(r.n);
  return out;
}

/** Jobs per state. One `count(*)` per state, so each is an index-only scan of (state, id). */
export async function countByState(db: Db, n: SchemaNames): Promise<StateCounts> {
  const rows = await db.query<{ state: string; n: number }>(
    `select s.state, (select count(*) from ${n.q}.jobs j where j.state = s.state::${n.q}.job_state) as n
       from unnest($1::text[]) as s(state)`,
    [JOB_STATES],
  );
  return fillCounts(rows);
}

/** Jobs per kind and state, kinds in name order. */
export async function countByKind(db: Db, n: SchemaNames): Promise<{ kind: string; counts: StateCounts }[]> {
  const rows = await db.query<{ kind: string; counts: Record<string, number> }>(
    `select kind, jsonb_object_agg(state, n) as counts
       from (select kind, state::text as state, count(*) as n from ${n.q}.jobs group by kind, state) k
      group by kind order by kind`,
  );
  return rows.map((r) => ({
    kind: r.kind,
    counts: fillCounts(Object.entries(r.counts).map(([state, c]) => ({ state, n: c }))),
  }));
}

/**
 * Completions and failures per minute over the last `minutes` minutes (the current minute
 * included), oldest first, one entry per minute. `failed` counts jobs that failed for good;
 * attempts that will be retried are not finalized and do not count.
 */
export async function throughput(db: Db, n: SchemaNames, minutes = 60): Promise<ThroughputPoint[]> {
  const rows = await db.query<{ minute: Date; completed: number; failed: number }>(
    `with bounds as (select date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute' as since),
          done as (
            select date_trunc('minute', finalized_at) as minute, state, count(*) as n
              from ${n.q}.jobs, bounds
             where state in ('completed', 'failed') and finalized_at >= bounds.since
             group by 1, 2)
     select m.minute,
            coalesce((select d.n from done d where d.minute = m.minute and d.state = 'completed'), 0) as completed,
            coalesce((select d.n from done d where d.minute = m.minute and d.state = 'failed'), 0) as failed
       from bounds, generate_series(bounds.since, date_trunc('minute', now()), interval '1 minute') as m(minute)
      order by m.minute`,
    [minutes],
  );
  return rows.map((r) => ({ minute: r.minute, completed: Number(r.completed), failed: Number(r.failed) }));
}

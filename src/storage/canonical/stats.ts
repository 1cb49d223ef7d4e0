/**
 * The dashboard's read queries: counts by state, by kind, and completions/failures per minute.
 * Each is shaped for the indexes of the jobs table (see bench/dashboard_queries.ts for timings
 * with 1,000,000 jobs):
 * - counts by state and per queue: one pass over the jobs table (no index covers (queue, state)),
 *   the ages of the oldest available jobs from the claim index; JIT off (see `withoutJit`);
 * - throughput: a range scan over the last hour only (`jobs_finalized_idx (finalized_at)`, partial on terminal states).
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { JOB_STATES, type JobState, type QueueInfo } from "../../types.ts";

/** A count for every job state (zeros included). */
export type StateCounts = Record<JobState, number>;

import type { ThroughputPoint } from "../engine.ts";

function fillCounts(rows: { state: string; n: unknown }[]): StateCounts {
  const out = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as StateCounts;
  for (const r of rows) if (r.state in out) out[r.state as JobState] = Number(r.n);
  return out;
}

/**
 * Runs `fn` in a short transaction with JIT off: these aggregates cross PostgreSQL's `jit_above_cost`
 * on large tables, and compiling them cost more than it saved (about 2x slower at 1,000,000 jobs).
 */
function withoutJit<T>(db: Db, fn: (tx: Db) => Promise<T>): Promise<T> {
  return db.begin(async (tx) => {
    await tx.query("set local jit = off");
    return await fn(tx);
  });
}

/**
 * Every queue that has jobs or a queues row (paused ahead), with counts by state and the age of its
 * oldest available job: one pass over the jobs table for the counts, and the claim index
 * (`jobs_claim_idx`, partial on available jobs) for the ages. Same result as `client.listQueues()`,
 * which makes three passes; the dashboard polls this.
 */
export async function queueStats(db: Db, n: SchemaNames): Promise<QueueInfo[]> {
  type Row = { name: string; paused: boolean; counts: Record<string, number>; age: number | null };
  const rows = await withoutJit(db, (tx) =>
    tx.query<Row>(
      `with counts as (select queue, state::text as state, count(*) as n from ${n.q}.jobs group by queue, state),
            per_queue as (select queue, jsonb_object_agg(state, n) as counts from counts group by queue),
            oldest as (select queue, extract(epoch from now() - min(run_at))::float8 as age
                         from ${n.q}.jobs where state = 'available' group by queue),
            names as (select name from ${n.q}.queues union select queue from per_queue)
       select names.name, coalesce(q.paused, false) as paused, coalesce(pq.counts, '{}') as counts,
              case when o.age is not null then greatest(o.age, 0) end as age
         from names left join ${n.q}.queues q on q.name = names.name
              left join per_queue pq on pq.queue = names.name
              left join oldest o on o.queue = names.name
        order by names.name`,
    ));
  return rows.map((r) => ({
    name: r.name,
    paused: r.paused,
    counts: fillCounts(Object.entries(r.counts).map(([state, c]) => ({ state, n: c }))),
    oldestAvailableAgeSeconds: r.age === null ? null : Number(r.age),
  }));
}

/** Jobs per kind and state, kinds in name order. */
export async function countByKind(db: Db, n: SchemaNames): Promise<{ kind: string; counts: StateCounts }[]> {
  const rows = await withoutJit(db, (tx) =>
    tx.query<{ kind: string; counts: Record<string, number> }>(
      `select kind, jsonb_object_agg(state, n) as counts
         from (select kind, state::text as state, count(*) as n from ${n.q}.jobs group by kind, state) k
        group by kind order by kind`,
    ));
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
  const rows = await withoutJit(db, (tx) =>
    tx.query<{ minute: Date; completed: number; failed: number }>(
      `with bounds as (select date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute' as since),
            done as (
              select date_trunc('minute', finalized_at) as minute,
                     count(*) filter (where state = 'completed') as completed,
                     count(*) filter (where state = 'failed') as failed
                from ${n.q}.jobs, bounds
               where state in ('completed', 'failed') and finalized_at >= bounds.since
               group by 1)
       select m.minute, coalesce(d.completed, 0) as completed, coalesce(d.failed, 0) as failed
         from bounds
              cross join generate_series(bounds.since, date_trunc('minute', now()), interval '1 minute') as m(minute)
              left join done d on d.minute = m.minute
        order by m.minute`,
      [minutes],
    ));
  return rows.map((r) => ({ minute: r.minute, completed: Number(r.completed), failed: Number(r.failed) }));
}

/** Queue pause/resume and per-queue counts. */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { JOB_STATES, type JobState, type QueueInfo } from "../../types.ts";

export async function setQueuePaused(db: Db, n: SchemaNames, name: string, paused: boolean): Promise<void> {
  await db.query(
    `with up as (
       insert into ${n.q}.queues (name, paused) values ($1, $2)
       on conflict (name) do update set paused = excluded.paused, updated_at = now() returning name)
     select up.name, case when $2 then null else pg_notify($3, up.name)::text end from up`,
    [name, paused, n.jobsChannel],
  );
}

/** Whether a queue has a queues row, a job, or a runtime heartbeated within `liveWithinMs` serving it. */
export async function queueKnown(
  db: Db,
  n: SchemaNames,
  name: string,
  liveWithinMs: number,
): Promise<boolean> {
  const rows = await db.query(
    `select exists(select 1 from ${n.q}.queues where name = $1)
         or exists(select 1 from ${n.q}.jobs where queue = $1)
         or exists(select 1 from ${n.q}.runtimes
                     where $1 = any(queues) and heartbeat_at > now() - $2::bigint * interval '1 millisecond')
         as known`,
    [name, liveWithinMs],
  );
  return rows[0].known === true;
}

/** Counts by state for every queue that has jobs or a queues row. */
export async function listQueues(db: Db, n: SchemaNames): Promise<QueueInfo[]> {
  const rows = await db.query(
    `with names as (select name from ${n.q}.queues union select distinct queue from ${n.q}.jobs),
          counts as (select queue, state::text as state, count(*) as c from ${n.q}.jobs group by queue, state),
          oldest as (select queue, extract(epoch from now() - min(run_at))::float8 as age
                       from ${n.q}.jobs where state = 'available' group by queue)
     select names.name, coalesce(q.paused, false) as paused,
            coalesce((select jsonb_object_agg(c.state, c.c) from counts c where c.queue = names.name), '{}') as counts,
            (select greatest(o.age, 0) from oldest o where o.queue = names.name) as age
       from names left join ${n.q}.queues q on q.name = names.name
      order by names.name`,
  );
  return rows.map((r) => ({
    name: r.name,
    paused: r.paused,
    counts: Object.fromEntries(JOB_STATES.map((s) => [s, Number(r.counts[s] ?? 0)])) as Record<
      JobState,
      number
    >,
    oldestAvailableAgeSeconds: r.age === null ? null : Number(r.age),
  }));
}

/** Pausing and resuming queues (the `queues` table of the svc schema, shared by both engines). */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";

/**
 * Pauses or resumes a queue (a row is created for a queue that has none). Either way its workers are
 * woken: on resume to claim, on pause to give back the jobs they prefetched.
 */
export async function setQueuePaused(db: Db, n: SchemaNames, name: string, paused: boolean): Promise<void> {
  await db.query(
    `with up as (
       insert into ${n.q}.queues (name, paused) values ($1, $2)
       on conflict (name) do update set paused = excluded.paused, updated_at = now() returning name)
     select up.name, pg_notify($3, up.name) from up`,
    [name, paused, n.jobsChannel],
  );
}

/** Whether a queue is paused. */
export async function queuePaused(db: Db, n: SchemaNames, name: string): Promise<boolean> {
  const rows = await db.query(`select paused from ${n.q}.queues where name = $1`, [name]);
  return rows[0]?.paused === true;
}

/** Whether a queue has fleet-wide limits (its claims count them under the queue's claim lock). */
export async function queueLimited(db: Db, n: SchemaNames, name: string): Promise<boolean> {
  const rows = await db.query(`select limited from ${n.q}.queues where name = $1`, [name]);
  return rows[0]?.limited === true;
}

/** Whether a queue has a queues row or a live runtime serving it (engines add: or a job). */
export async function queueDeclared(
  db: Db,
  n: SchemaNames,
  name: string,
  liveWithinMs: number,
): Promise<boolean> {
  const [r] = await db.query(
    `select exists (select 1 from ${n.q}.queues where name = $1)
         or exists (select 1 from ${n.q}.runtimes
                     where $1 = any(queues) and heartbeat_at > now() - $2::bigint * interval '1 millisecond') as known`,
    [name, liveWithinMs],
  );
  return r.known;
}

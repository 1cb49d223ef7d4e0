/**
 * Claims available jobs of one queue with `FOR UPDATE SKIP LOCKED`: attempt += 1, lease += 1,
 * heartbeat now, and the per-kind hard deadline. A paused queue yields nothing.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import { rowToJob } from "../job_row.ts";

export async function claimJobs(
  db: Db,
  n: SchemaNames,
  queue: string,
  limit: number,
  runtimeId: string,
  timeoutsMs: Record<string, number>,
): Promise<Job[]> {
  const rows = await db.query(
    `with next as (
       select id from ${n.q}.jobs
        where state = 'available' and queue = $1
          and not exists (select 1 from ${n.q}.queues q where q.name = $1 and q.paused)
        order by priority, run_at, id
        limit $2
        for update skip locked)
     update ${n.q}.jobs j
        set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1, attempted_at = now(),
            heartbeat_at = now(), attempted_by = $3,
            deadline_at = now() + (($4::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
       from next where j.id = next.id
     returning j.*`,
    [queue, limit, runtimeId, JSON.stringify(timeoutsMs)],
  );
  return rows.map(rowToJob).sort((a, b) => a.priority - b.priority || +a.runAt - +b.runAt || a.id - b.id);
}

/**
 * Claims available jobs of one queue with `FOR UPDATE SKIP LOCKED`: attempt += 1, lease += 1,
 * heartbeat now, and the per-kind hard deadline. A paused queue yields nothing. Completions are
 * written by their own batched statement (complete.ts), concurrently with the next claim.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import { rowToJob } from "../job_row.ts";

/** The jobs to claim: `$1` queue, `$2` limit; none while the queue is paused. */
function nextCte(n: SchemaNames): string {
  return `next as (
       select id from ${n.q}.jobs
        where state = 'available' and queue = $1
          and not exists (select 1 from ${n.q}.queues q where q.name = $1 and q.paused)
        order by priority, run_at, id
        limit $2
        for update skip locked)`;
}

/** The claim itself: `$3` runtime id, `$4` deadlines per kind (ms); `extraSet` adds assignments. */
function claimUpdate(n: SchemaNames, extraSet: string): string {
  return `update ${n.q}.jobs j
        set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1, attempted_at = now(),
            heartbeat_at = now(), attempted_by = $3,
            deadline_at = now() + (($4::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')${extraSet}
       from next where j.id = next.id
     returning j.*`;
}

function inClaimOrder(jobs: Job[]): Job[] {
  return jobs.sort((a, b) => a.priority - b.priority || +a.runAt - +b.runAt || a.id - b.id);
}

/** Extra claim assignments: a fresh callback for the kinds in `$5` (HTTP workers), with its deadline. */
const REGISTER_HTTP_CALLBACK = `,
            callback_id = case when $5::text::jsonb ? j.kind then gen_random_uuid() else j.callback_id end,
            callback_timeout_at = case when $5::text::jsonb ? j.kind
              then now() + (($5::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
              else j.callback_timeout_at end`;

/**
 * Claims at most `limit` available jobs of `queue` for `runtimeId`, with each kind's hard deadline from
 * `timeoutsMs`. Jobs of the kinds in `callbackTimeoutsMs` (HTTP workers) get a callback registered in
 * the same statement: one commit fewer per HTTP job.
 */
export async function claimJobs(
  db: Db,
  n: SchemaNames,
  queue: string,
  limit: number,
  runtimeId: string,
  timeoutsMs: Record<string, number>,
  callbackTimeoutsMs: Record<string, number> = {},
): Promise<Job[]> {
  const params: unknown[] = [queue, limit, runtimeId, JSON.stringify(timeoutsMs)];
  let text = `with ${nextCte(n)}
     ${claimUpdate(n, "")}`;
  if (Object.keys(callbackTimeoutsMs).length > 0) {
    params.push(JSON.stringify(callbackTimeoutsMs));
    text = `with ${nextCte(n)},
     claimed as (
       ${claimUpdate(n, REGISTER_HTTP_CALLBACK)}),
     superseded as (
       update ${n.q}.callbacks c set state = 'superseded', resolved_at = now()
        where c.state = 'pending' and c.job_id in (select id from claimed where $5::text::jsonb ? kind)),
     registered as (
       insert into ${n.q}.callbacks (id, job_id, attempt, lease, kind, deadline_at)
       select c.callback_id, c.id, c.attempt, c.lease, 'http', c.callback_timeout_at
         from claimed c where $5::text::jsonb ? c.kind)
     select * from claimed`;
  }
  const rows = await db.query(text, params);
  return inClaimOrder(rows.map(rowToJob));
}

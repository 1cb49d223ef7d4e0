/**
 * Claims available jobs of one queue with `FOR UPDATE SKIP LOCKED`: attempt += 1, lease += 1,
 * heartbeat now, and the per-kind hard deadline. A paused queue yields nothing.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import { rowToJob } from "../job_row.ts";
import type { Completion } from "../engine.ts";

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

/**
 * Writes a batch of completions and claims the next jobs in one statement (one round trip). The two
 * touch disjoint rows (completions are `running`, claims `available`), so they cannot interfere.
 */
export async function completeAndClaimJobs(
  db: Db,
  n: SchemaNames,
  completions: Completion[],
  deleteRows: boolean,
  queue: string,
  limit: number,
  runtimeId: string,
  timeoutsMs: Record<string, number>,
  callbackTimeoutsMs: Record<string, number> = {},
): Promise<{ jobs: Job[]; completedIds: number[] }> {
  if (completions.length === 0 && Object.keys(callbackTimeoutsMs).length === 0) {
    // The idle path (a job just arrived): the plain claim statement is the shortest.
    return { jobs: await claimJobs(db, n, queue, limit, runtimeId, timeoutsMs), completedIds: [] };
  }
  const done = deleteRows
    ? `delete from ${n.q}.jobs j using jsonb_to_recordset($5::text::jsonb) as u(id bigint, lease integer, result jsonb)
        where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`
    : `update ${n.q}.jobs j
          set state = 'completed', result = u.result, finalized_at = now(), heartbeat_at = null, deadline_at = null
         from jsonb_to_recordset($5::text::jsonb) as u(id bigint, lease integer, result jsonb)
        where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`;
  const rows = await db.query(
    `with done as (${done}),
     next as (
       select id from ${n.q}.jobs
        where state = 'available' and queue = $1
          and not exists (select 1 from ${n.q}.queues q where q.name = $1 and q.paused)
        order by priority, run_at, id
        limit $2
        for update skip locked),
     claimed as (
       update ${n.q}.jobs j
          set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1, attempted_at = now(),
              heartbeat_at = now(), attempted_by = $3,
              deadline_at = now() + (($4::text::jsonb ->> j.kind)::bigint * interval '1 millisecond'),
              callback_id = case when $6::text::jsonb ? j.kind then gen_random_uuid() else j.callback_id end,
              callback_timeout_at = case when $6::text::jsonb ? j.kind
                then now() + (($6::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
                else j.callback_timeout_at end
         from next where j.id = next.id
       returning j.*),
     superseded as (
       update ${n.q}.callbacks c set state = 'superseded', resolved_at = now()
        where c.state = 'pending' and c.job_id in (select id from claimed where $6::text::jsonb ? kind)),
     registered as (
       insert into ${n.q}.callbacks (id, job_id, attempt, lease, kind, deadline_at)
       select id_, job_id, attempt, lease, 'http', deadline
         from (select callback_id as id_, id as job_id, attempt, lease, callback_timeout_at as deadline, kind
                 from claimed) c
        where $6::text::jsonb ? c.kind)
     select d.done_ids, c.* from (select array_agg(id) as done_ids from done) d left join claimed c on true`,
    [
      queue,
      limit,
      runtimeId,
      JSON.stringify(timeoutsMs),
      JSON.stringify(completions.map((c) => ({ id: c.id, lease: c.lease, result: c.result ?? null }))),
      JSON.stringify(callbackTimeoutsMs),
    ],
  );
  const completedIds = ((rows[0]?.done_ids ?? []) as (number | string)[]).map(Number);
  const jobs = rows.filter((r) => r.id !== null).map(rowToJob)
    .sort((a, b) => a.priority - b.priority || +a.runAt - +b.runAt || a.id - b.id);
  return { jobs, completedIds };
}

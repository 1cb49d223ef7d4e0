/**
 * The ends of an attempt other than completion, guarded by (id, run lease): a failure (through the
 * SQL function `canonical_fail_attempt`, the one path that applies the retry policy stored at claim),
 * a snooze, parking, heartbeats, and the start records and give-backs of prefetched attempts.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { AttemptRef, Failure, ParkRequest } from "../engine.ts";
import { storedErrorText } from "../../job_errors.ts";
import { jobFromJson } from "../../wire.ts";

export async function failJob(db: Db, n: SchemaNames, f: Failure): Promise<Job | null> {
  const rows = await db.query(
    `select * from ${n.q}.canonical_fail_attempt($1, $2, $3, $4, $5, p_started_at => $6)`,
    [
      f.id,
      f.lease,
      storedErrorText(f.error, f.stack),
      f.terminal,
      f.retryDelayMs === undefined ? null : Math.max(0, Math.round(f.retryDelayMs)),
      f.startedAt ?? null,
    ],
  );
  return rows.length && rows[0].id !== null ? jobFromJson(rows[0]) : null;
}

/** Gives the attempt back, scheduled `delayMs` later (`canonical_snooze`; while mixed the job moves to queue storage). */
export async function snoozeJob(
  db: Db,
  n: SchemaNames,
  id: number,
  lease: number,
  delayMs: number,
): Promise<boolean> {
  const [r] = await db.query(`select ${n.q}.canonical_snooze($1, $2, $3) as ok`, [
    id,
    lease,
    Math.max(0, Math.round(delayMs)),
  ]);
  return r.ok === true;
}

/**
 * Parks running attempts in \`waiting_external\`, in one statement, except those whose callback was
 * already resolved (the resolver locks the job row too); returns the ids parked.
 * Committed without waiting for the WAL flush: if PostgreSQL crashes before the flush, the park is lost
 * and the attempt is `running` with no heartbeat, so the leader rescues and retries it, exactly as if
 * the worker had died before parking. Any later synchronous commit (the callback's resolution) flushes
 * the park first, so the two can never be seen out of order.
 */
export async function parkJobs(db: Db, n: SchemaNames, items: ParkRequest[]): Promise<number[]> {
  if (items.length === 0) return [];
  const rows = await db.query(
    `with async_commit as (select set_config('synchronous_commit', 'off', true) as v)
     update ${n.q}.jobs j set state = 'waiting_external', heartbeat_at = null, deadline_at = null
       from json_to_recordset($1::text::json) as u(id bigint, lease integer, callback_id uuid)
      where (select v from async_commit) = 'off'
        and j.id = any($2::bigint[]) and j.state = 'running' and j.id = u.id and j.lease = u.lease
        and j.callback_id = u.callback_id
        and exists (select 1 from ${n.q}.callbacks c
                     where c.id = any($3::uuid[]) and c.id = u.callback_id and c.state = 'pending')
      returning j.id`,
    [
      JSON.stringify(items.map((p) => ({ id: p.id, lease: p.lease, callback_id: p.callbackId }))),
      items.map((p) => p.id),
      items.map((p) => p.callbackId),
    ],
  );
  return rows.map((r) => Number(r.id));
}

export async function heartbeatJobs(db: Db, n: SchemaNames, items: AttemptRef[]): Promise<void> {
  if (items.length === 0) return;
  await db.query(
    `update ${n.q}.jobs j set heartbeat_at = now()
       from json_to_recordset($1::text::json) as u(id bigint, lease integer)
      where j.id = any($2::bigint[]) and j.state = 'running' and j.id = u.id and j.lease = u.lease`,
    [JSON.stringify(items), items.map((i) => i.id)],
  );
}

/** Held (prefetched) attempts that never started go back to `available`: attempt refunded, run_at kept. */
export async function giveBack(db: Db, n: SchemaNames, items: AttemptRef[]): Promise<number[]> {
  if (items.length === 0) return [];
  const rows = await db.query(
    `select u.id from json_to_recordset($1::text::json) as u(id bigint, lease integer)
      where ${n.q}.canonical_give_back(u.id, u.lease)`,
    [JSON.stringify(items)],
  );
  return rows.map((r) => Number(r.id));
}

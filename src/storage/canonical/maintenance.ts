/** The leader's SQL: promotion, rescue, callback-timeout expiry and retention cleanup. Batched, idempotent. */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { MaintainedJob, Retention } from "../engine.ts";
import { DEADLINE_GRACE_MS } from "../shared/attempts.ts";

const BATCH = 1000;

/** Makes due `scheduled` and `retryable` jobs `available` and wakes their queues. */
export async function promoteDue(db: Db, n: SchemaNames): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await db.query(
      `with due as (
         select id from ${n.q}.jobs where state in ('scheduled', 'retryable') and run_at <= now()
          order by run_at limit $1 for update skip locked),
       upd as (
         update ${n.q}.jobs j set state = 'available' from due where j.id = due.id returning j.queue)
       select (select count(*) from upd) as n,
              (select count(pg_notify($2, queue)::text) from (select distinct queue from upd) q) as queues`,
      [BATCH, n.jobsChannel],
    );
    const count = Number(rows[0].n);
    total += count;
    if (count < BATCH) return total;
  }
}

/**
 * Rescues running attempts whose heartbeat is stale or whose hard deadline passed (plus the grace): each
 * fails through `canonical_fail_attempt` with the policy stored at claim (retryable after the stored
 * delay, or failed when it was the last attempt). A held (prefetched) attempt counts too: its attempt
 * was consumed at claim, so a job that kills its worker still runs out of attempts.
 */
export async function rescueStale(db: Db, n: SchemaNames, rescueAfterMs: number): Promise<MaintainedJob[]> {
  const rows = await db.query(
    `with stale as (
       select id, lease, kind,
              case when deadline_at < now() - $3::bigint * interval '1 millisecond' then 'deadline exceeded'
                   else 'heartbeat stale: worker presumed dead' end as reason
         from ${n.q}.jobs
        where state = 'running'
          and (heartbeat_at < now() - $1::bigint * interval '1 millisecond'
               or deadline_at < now() - $3::bigint * interval '1 millisecond')
        limit $2 for update skip locked),
     done as (
       select s.id, s.kind, s.reason,
              (${n.q}.canonical_fail_attempt(s.id, s.lease, 'rescued: ' || s.reason, false)).state::text as state
         from stale s)
     select done.*, pg_notify($4, done.id::text)::text as notified from done where done.state is not null`,
    [rescueAfterMs, BATCH, DEADLINE_GRACE_MS, n.abortChannel],
  );
  return rows.map((r) => ({ id: Number(r.id), kind: r.kind, state: r.state, reason: r.reason }));
}

/**
 * Parked attempts whose callback deadline passed: `retryable` after the stored delay, or `failed` when
 * it was the last attempt, through `canonical_fail_attempt`; their callback becomes `expired`.
 */
export async function expireCallbacks(db: Db, n: SchemaNames): Promise<MaintainedJob[]> {
  const rows = await db.query(
    `with due as (
       select id, lease, kind, callback_id from ${n.q}.jobs
        where state = 'waiting_external' and callback_timeout_at < now()
        limit $1 for update skip locked),
     upd as (
       select due.id, due.kind, due.callback_id,
              (${n.q}.canonical_fail_attempt(due.id, due.lease, 'callback timed out', false, null,
                                             '{waiting_external}')).state::text as state
         from due),
     cb as (
       update ${n.q}.callbacks c set state = 'expired', resolved_at = now()
        where c.id = any(array(select callback_id from upd where state is not null)) and c.state = 'pending'
        returning c.id)
     select upd.*, (select count(*) from cb) as expired,
            pg_notify($2, upd.callback_id::text)::text as notified from upd where upd.state is not null`,
    [BATCH, n.callbacksChannel],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    kind: r.kind,
    state: r.state,
    reason: "callback timed out",
    callbackId: r.callback_id,
  }));
}

/** Deletes finished jobs past their retention (their callbacks go with them). */
export async function cleanupFinished(db: Db, n: SchemaNames, r: Retention): Promise<number> {
  let total = 0;
  for (const [states, ms] of [[["completed"], r.completed], [["failed", "cancelled"], r.failed]] as const) {
    for (;;) {
      const rows = await db.query(
        `with old as (
           select id from ${n.q}.jobs
            where state in ('completed', 'failed', 'cancelled') and state::text = any($1::text[])
              and finalized_at < now() - $2::bigint * interval '1 millisecond'
            order by finalized_at limit 5000 for update skip locked)
         delete from ${n.q}.jobs j using old where j.id = old.id returning j.id`,
        [states, ms],
      );
      total += rows.length;
      if (rows.length < 5000) break;
    }
  }
  return total;
}

/** Below this many row changes a table's statistics are never refreshed by svc. */
const STATS_MIN_CHANGES = 1000;

/**
 * Runs ANALYZE on the jobs and callbacks tables when their planner statistics are missing or far
 * behind: never analyzed and at least 1,000 rows changed, or more rows changed since the last ANALYZE
 * than max(10,000, twice the rows it counted). Autovacuum normally does this earlier (after 10 %);
 * this is the backstop for a burst it has not caught up with yet, or a server with autovacuum off.
 * Without statistics PostgreSQL took a claim for a scan of the whole backlog plus a sort: 73 ms per
 * claim of 10 with 200,000 available jobs, 1 ms after ANALYZE. It never waits for a table lock (an
 * autovacuum at work holds it). Returns whether it analyzed.
 */
export async function refreshStatistics(db: Db, n: SchemaNames): Promise<boolean> {
  const rows = await db.query(
    `select c.relname, c.reltuples::float8 as reltuples, coalesce(s.n_mod_since_analyze, 0)::float8 as changed,
            (s.last_analyze is null and s.last_autoanalyze is null) as never
       from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
      where c.oid in (to_regclass($1), to_regclass($2))`,
    [`${n.q}.jobs`, `${n.q}.callbacks`],
  );
  const due = rows.filter(({ reltuples, changed, never }) =>
    never || reltuples < 0
      ? changed >= STATS_MIN_CHANGES
      : changed > Math.max(10 * STATS_MIN_CHANGES, 2 * reltuples)
  );
  let analyzed = false;
  for (const r of due) {
    // Never wait on a lock: an autovacuum at work on the table holds it, and a waiter would cancel that
    // autovacuum after deadlock_timeout (1 s). Give up at once instead; the next tick tries again.
    const table = `${n.q}.${r.relname === "jobs" ? "jobs" : "callbacks"}`;
    try {
      await db.begin(async (tx) => {
        await tx.query(`select set_config('lock_timeout', '50ms', true)`);
        await tx.query(`analyze ${table}`);
      });
      analyzed = true;
    } catch (e) {
      if ((e as { code?: string }).code !== "55P03") throw e; // lock_not_available
    }
  }
  return analyzed;
}

/**
 * Claims available jobs of one queue with `FOR UPDATE SKIP LOCKED`: attempt += 1, lease += 1,
 * heartbeat now, the per-kind hard deadline, and the retry policy that applies to the attempt (its
 * kind's max attempts and the delay its retry gets), stored so that every path that fails the attempt
 * uses it. A paused queue yields nothing. Jobs claimed beyond the free slots are held (prefetched): their
 * attempt is counted now as well, and their deadline includes the prefetch TTL. `claimed_at` is the
 * claim's time; `attempted_at` stays null until the outcome writes the handler's real start.
 */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job } from "../../types.ts";
import type { Claimed, ClaimRequest } from "../engine.ts";
import { throttleOf } from "../shared/limits.ts";
import { policiesJson } from "../shared/attempts.ts";
import { jobFromJson } from "../../wire.ts";

/**
 * The jobs to claim: `$1` queue, `$2` limit, numbered in claim order; none while the queue is paused, and
 * none through the plain claim while it is limited (its claims go through `claimLimited`, which takes the
 * queue's claim lock and the budget first).
 */
function nextCte(n: SchemaNames): string {
  return `next as (
       select id, row_number() over (order by priority, run_at, id) as n from (
         select id, priority, run_at from ${n.q}.jobs
          where state = 'available' and queue = $1
            and not exists (select 1 from ${n.q}.queues q where q.name = $1 and (q.paused or q.limited))
          order by priority, run_at, id
          limit $2
          for update skip locked) c)`;
}

/**
 * The claim itself: `$3` runtime id, `$4` policies per kind ({max_attempts, timeout_ms, delays_ms}),
 * `$5` free slots (later rows are prefetched), `$6` prefetch TTL in ms; `extraSet` adds assignments.
 */
function claimUpdate(n: SchemaNames, extraSet: string): string {
  return `update ${n.q}.jobs j
        set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1,
            claimed_at = now(), attempted_at = null,
            heartbeat_at = now(), attempted_by = $3,
            deadline_at = now() + ((($4::text::jsonb -> j.kind ->> 'timeout_ms')::bigint
                                    + case when next.n > $5 then $6::bigint else 0 end) * interval '1 millisecond'),
            effective_max_attempts = least(j.max_attempts,
              coalesce(($4::text::jsonb -> j.kind ->> 'max_attempts')::integer, j.max_attempts)),
            retry_delay_ms = coalesce(
              ($4::text::jsonb -> j.kind -> 'delays_ms' ->> least(j.attempt,
                 jsonb_array_length(coalesce($4::text::jsonb -> j.kind -> 'delays_ms', '[null]')) - 1))::bigint,
              ${n.q}.backoff_ms(j.attempt + 1))${extraSet}
       from next where j.id = next.id
     returning j.*, next.n > $5 as prefetched`;
}

/** `$1` queue, `$2` limit, `$3` runtime id, `$4` policies, `$5` free slots, `$6` prefetch TTL in ms. */
function claimParams(req: ClaimRequest): unknown[] {
  return [
    req.queue,
    req.limit,
    req.runtimeId,
    policiesJson(req),
    req.free,
    Math.max(0, Math.round(req.prefetchTtlMs)),
  ];
}

function inClaimOrder(jobs: Job[]): Job[] {
  return jobs.sort((a, b) => a.priority - b.priority || +a.runAt - +b.runAt || a.id - b.id);
}

/** Extra claim assignments: a fresh callback for the kinds in `$7` (HTTP workers), with its deadline. */
const REGISTER_HTTP_CALLBACK = `,
            callback_id = case when $7::text::jsonb ? j.kind then gen_random_uuid() else j.callback_id end,
            callback_timeout_at = case when $7::text::jsonb ? j.kind
              then now() + (($7::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
              else j.callback_timeout_at end`;

/**
 * Claims at most `req.limit` available jobs of `req.queue`. Jobs of the kinds in
 * `req.callbackTimeoutsMs` (HTTP workers) get a callback registered in the same statement: one commit
 * fewer per HTTP job.
 */
export async function claimJobs(db: Db, n: SchemaNames, req: ClaimRequest): Promise<Job[]> {
  const params = claimParams(req);
  let text = `with ${nextCte(n)}
     ${claimUpdate(n, "")}`;
  if (Object.keys(req.callbackTimeoutsMs).length > 0) {
    params.push(JSON.stringify(req.callbackTimeoutsMs));
    text = `with ${nextCte(n)},
     claimed as (
       ${claimUpdate(n, REGISTER_HTTP_CALLBACK)}),
     superseded as (
       update ${n.q}.callbacks c set state = 'superseded', resolved_at = now()
        where c.state = 'pending' and c.job_id = any(array(select id from claimed where $7::text::jsonb ? kind))),
     registered as (
       insert into ${n.q}.callbacks (id, job_id, attempt, lease, kind, deadline_at)
       select c.callback_id, c.id, c.attempt, c.lease, 'http', c.callback_timeout_at
         from claimed c where $7::text::jsonb ? c.kind)
     select * from claimed`;
  }
  const rows = await db.query(text, params);
  return inClaimOrder(rows.map((r) => {
    const job = jobFromJson(r);
    // In the worker, a job that runs at once starts at its claim; a held one when the dispatcher feeds it.
    if (r.prefetched) job.prefetched = true;
    else job.attemptedAt = job.claimedAt;
    return job;
  }));
}

/**
 * The claim of a limited queue (ADR 019), one call of `canonical_claim_limited`: the queue's claim lock (queue
 * storage's key, so that while the storage transition is mixed both engines' claims take turns) and the budget
 * its limits leave, the claim of at most that many, and a `limit_log` row for a rate. `limited` false: the
 * queue turned out to have no limit (its claim ran as a plain one).
 */
export async function claimLimited(
  db: Db,
  n: SchemaNames,
  req: ClaimRequest,
): Promise<{ jobs: Claimed; limited: boolean }> {
  const rows = await db.query(
    `select j from ${n.q}.canonical_claim_limited($1, $2, $3, $4::text::jsonb, $5, $6, $7::text::jsonb) j`,
    [...claimParams(req), JSON.stringify(req.callbackTimeoutsMs)],
  );
  let limited = true;
  let throttle: Row | null = null;
  const jobs: Claimed = [];
  for (const { j } of rows) {
    if (j.id === undefined) {
      if (j.limited === false) limited = false;
      else throttle = j;
      continue;
    }
    const job = jobFromJson(j);
    if (j.prefetched) job.prefetched = true;
    else job.attemptedAt = job.claimedAt;
    jobs.push(job);
  }
  inClaimOrder(jobs);
  if (throttle) jobs.throttle = throttleOf(throttle);
  return { jobs, limited };
}

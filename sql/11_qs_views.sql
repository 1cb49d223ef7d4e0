-- Queue storage: the job views (one job shape over the ring, the heap tables and history).

create or replace view svc_qs.jobs_parked as
select p.job_id as id, p.kind, p.queue, p.args, p.state::job_state as state, p.priority, p.attempt,
       p.max_attempts, p.run_at, p.created_at, null::timestamptz as attempted_at, null::timestamptz as finalized_at,
       case when p.state = 'running' then (select w.heartbeat_at from runtimes w where w.id = p.attempted_by) end
         as heartbeat_at,
       p.deadline_at, p.errors, p.tags, p.metadata, null::jsonb as result, p.unique_key,
       cb.id as callback_id, cb.deadline_at as callback_timeout_at, p.lease, p.attempted_by, p.trace_context,
       p.effective_max_attempts, p.retry_delay_ms, p.claimed_at, p.limit_key
  from svc_qs.parked p
  left join lateral (select c.id, c.deadline_at from svc_qs.callbacks c
                      where c.job_id = p.job_id and c.lease = p.lease order by c.created_at desc limit 1) cb on true;

create or replace view svc_qs.jobs_deferred as
select d.job_id as id, d.kind, d.queue, d.args, d.state::job_state as state, d.priority, d.attempt, d.max_attempts,
       d.run_at, d.created_at, d.attempted_at, null::timestamptz as finalized_at, null::timestamptz as heartbeat_at,
       null::timestamptz as deadline_at, d.errors, d.tags, d.metadata, null::jsonb as result, d.unique_key,
       null::uuid as callback_id, null::timestamptz as callback_timeout_at, d.lease, d.attempted_by,
       d.trace_context, d.effective_max_attempts, null::bigint as retry_delay_ms, d.claimed_at, d.limit_key
  from svc_qs.deferred d;

-- The claimed jobs: each ready row with the claim whose range covers it. The claim is found from the row (the
-- first claim of its lane shard and slot whose last_seq is at or after the row's seq: one index probe), never
-- by joining claims to ready rows on the range, which the planner turns into a merge join that compares every
-- row of a lane shard with every claim of it (minutes once a slot holds 600,000 rows). Callers that start from
-- claims (rescue, moving long attempts) expand each claim's range themselves.
create or replace view svc_qs.claimed_jobs as
select c.slot, c.claim_id, c.worker, c.at as claimed_at, c.policies, c.ttl_ms, r.queue, r.priority, r.shard, r.seq,
       r.job_id, r.lease + 1 as lease, r.attempt + 1 as attempt, r.kind, r.args, r.max_attempts, r.run_at,
       r.created_at, r.errors, r.tags, r.metadata, r.unique_key, r.trace_context,
       c.at + ((c.policies -> r.kind ->> 'timeout_ms')::bigint + c.ttl_ms) * interval '1 millisecond' as deadline_at,
       least(r.max_attempts, coalesce((c.policies -> r.kind ->> 'max_attempts')::integer, r.max_attempts))
         as effective_max_attempts,
       coalesce((c.policies -> r.kind -> 'delays_ms' ->> least(r.attempt,
                   jsonb_array_length(coalesce(c.policies -> r.kind -> 'delays_ms', '[null]')) - 1))::bigint,
                backoff_ms(r.attempt + 1)) as retry_delay_ms,
       r.limit_key
  from svc_qs.ready r
  cross join lateral (
    select c.* from svc_qs.claims c
     where c.queue = r.queue and c.priority = r.priority and c.shard = r.shard and c.slot = r.slot
       and c.last_seq >= r.seq
     order by c.last_seq limit 1) c
 where c.first_seq <= r.seq
   and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                     and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot);

create or replace view svc_qs.jobs_available as
select r.job_id as id, r.kind, r.queue, r.args, 'available'::job_state as state, r.priority, r.attempt,
       r.max_attempts, r.run_at, r.created_at, r.attempted_at, null::timestamptz as finalized_at,
       null::timestamptz as heartbeat_at, null::timestamptz as deadline_at, r.errors, r.tags, r.metadata,
       null::jsonb as result, r.unique_key, null::uuid as callback_id, null::timestamptz as callback_timeout_at,
       r.lease, r.attempted_by, r.trace_context, null::integer as effective_max_attempts,
       null::bigint as retry_delay_ms, r.claimed_at, r.limit_key
  from svc_qs.ready r
 where r.seq > svc_qs.lane_cursor(r.queue, r.priority, r.shard)
   and not exists (select 1 from svc_qs.skipped s
                    where s.queue = r.queue and s.priority = r.priority and s.shard = r.shard
                      and s.seq = r.seq and s.slot = r.slot);

create or replace view svc_qs.jobs_running as
select j.job_id as id, j.kind, j.queue, j.args, 'running'::job_state as state, j.priority, j.attempt,
       j.max_attempts, j.run_at, j.created_at, null::timestamptz as attempted_at, null::timestamptz as finalized_at,
       (select w.heartbeat_at from runtimes w where w.id = j.worker) as heartbeat_at,
       j.deadline_at, j.errors, j.tags, j.metadata, null::jsonb as result, j.unique_key,
       cb.id as callback_id, cb.deadline_at as callback_timeout_at, j.lease, j.worker as attempted_by,
       j.trace_context, j.effective_max_attempts, j.retry_delay_ms, j.claimed_at, j.limit_key
  from svc_qs.claimed_jobs j
  left join lateral (select c.id, c.deadline_at from svc_qs.callbacks c
                      where c.job_id = j.job_id and c.lease = j.lease order by c.created_at desc limit 1) cb on true
 where not svc_qs.attempt_closed(j.job_id, j.lease, j.slot, j.claim_id);

-- Completed attempts still in the ring: the completions of their claims, or a closed row `complete`.
create or replace view svc_qs.ring_completed as
select x.slot, x.claim_id, u.id as job_id, u.lease, u.started_at, u.result, x.at as finalized_at
  from svc_qs.completions x
  cross join lateral unnest(x.ids, x.leases, x.started_at, x.results) as u(id, lease, started_at, result)
union all
select c.slot, null::bigint, c.job_id, c.lease, c.started_at, c.result, c.at
  from svc_qs.closed c where c.outcome = 'complete';

create or replace view svc_qs.jobs_finished as
select h.job_id as id, h.kind, h.queue, h.args, h.state::job_state as state, h.priority, h.attempt, h.max_attempts,
       h.run_at, h.created_at, h.attempted_at, h.finalized_at, null::timestamptz as heartbeat_at,
       null::timestamptz as deadline_at, h.errors, h.tags, h.metadata, h.result, h.unique_key,
       (select c.id from svc_qs.callbacks c where c.job_id = h.job_id and c.lease = h.lease
         order by c.created_at desc limit 1) as callback_id,
       null::timestamptz as callback_timeout_at, h.lease, h.attempted_by, h.trace_context,
       h.effective_max_attempts, null::bigint as retry_delay_ms, h.claimed_at, h.limit_key
  from svc_qs.history h
 where not exists (select 1 from svc_qs.ready r where r.job_id = h.job_id and r.lease > h.lease)
   and not exists (select 1 from svc_qs.deferred d where d.job_id = h.job_id)
   and not exists (select 1 from svc_qs.parked p where p.job_id = h.job_id)
   and not exists (select 1 from svc_qs.history h2 where h2.job_id = h.job_id and h2.lease > h.lease)
   and not exists (select 1 from svc_qs.deleted x where x.job_id = h.job_id)
union all
-- Completed in the ring. Driven from the ready row (its job_id index), then its claim (one index probe, as in
-- claimed_jobs), then that claim's completion rows (their claim_id index) or a closed row `complete`: a lookup
-- by id costs a few index probes. (Driven from ring_completed, the filter on the id could not reach an index:
-- every completion row of the ring was unnested for one job, 50 ms at 100,000 retained jobs, on every
-- failure, snooze and cancel, whose answer reads the job.)
select r.job_id as id, r.kind, r.queue, r.args, 'completed'::job_state as state, r.priority, r.attempt + 1 as attempt,
       r.max_attempts, r.run_at, r.created_at, c.started_at as attempted_at, c.finalized_at,
       null::timestamptz as heartbeat_at, null::timestamptz as deadline_at, r.errors, r.tags, r.metadata,
       coalesce(c.result, 'null'), r.unique_key,
       (select cb.id from svc_qs.callbacks cb where cb.job_id = r.job_id and cb.lease = r.lease + 1
         order by cb.created_at desc limit 1) as callback_id,
       null::timestamptz as callback_timeout_at, r.lease + 1 as lease, k.worker as attempted_by, r.trace_context,
       least(r.max_attempts, coalesce((k.policies -> r.kind ->> 'max_attempts')::integer, r.max_attempts)),
       null::bigint as retry_delay_ms, k.at as claimed_at, r.limit_key
  from svc_qs.ready r
  cross join lateral (select k.claim_id, k.worker, k.policies, k.at from svc_qs.claims k
                       where k.queue = r.queue and k.priority = r.priority and k.shard = r.shard and k.slot = r.slot
                         and k.last_seq >= r.seq order by k.last_seq limit 1) k
  cross join lateral (
    (select u.started_at, u.result, x.at as finalized_at
       from svc_qs.completions x
       cross join lateral unnest(x.ids, x.leases, x.started_at, x.results) as u(id, lease, started_at, result)
      where x.claim_id = k.claim_id and x.slot = r.slot and u.id = r.job_id and u.lease = r.lease + 1
      limit 1)
    union all
    (select cl.started_at, cl.result, cl.at from svc_qs.closed cl
      where cl.job_id = r.job_id and cl.lease = r.lease + 1 and cl.slot = r.slot and cl.outcome = 'complete')
    limit 1) c
 where not exists (select 1 from svc_qs.ready r2 where r2.job_id = r.job_id and r2.lease > r.lease + 1)
   and not exists (select 1 from svc_qs.deferred d where d.job_id = r.job_id)
   and not exists (select 1 from svc_qs.parked p where p.job_id = r.job_id)
   and not exists (select 1 from svc_qs.history h2 where h2.job_id = r.job_id and h2.lease > r.lease + 1)
   and not exists (select 1 from svc_qs.deleted x where x.job_id = r.job_id);

create or replace view svc_qs.jobs as
  select * from svc_qs.jobs_available
  union all select * from svc_qs.jobs_running
  union all select * from svc_qs.jobs_parked
  union all select * from svc_qs.jobs_deferred
  union all select * from svc_qs.jobs_finished;

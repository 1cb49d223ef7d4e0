-- Queue storage: the ring's slot, lane and claim-batch locks, and where an attempt is.

------------------------------------------------------------------------------------------------------
-- Functions of the queue_storage engine. They run with search_path = the base schema (runtimes,
-- queues, storage_state, helpers) and name their own tables with the queue-storage schema.
------------------------------------------------------------------------------------------------------

create or replace function svc_qs.current_slot() returns smallint language plpgsql stable set search_path from current set jit = off as $$
begin
  return (select slot from svc_qs.ring_rotations order by generation desc limit 1);
end $$;

-- The slot a producer writes ready rows into, read from the ring's position (a sequence, so without a
-- snapshot: a REPEATABLE READ producer whose snapshot predates a rotation still gets the new slot) under a
-- shared lock on its generation, held until commit. A rotation moves the position first; a generation
-- whose lock can then be taken exclusively has no producer left that could still write into its slot
-- (claim_exhausted relies on it). The position is read again under the lock: a rotation in between sends
-- the producer to the new generation.
create or replace function svc_qs.write_slot() returns smallint
language plpgsql volatile set search_path from current set jit = off as $$
declare
  v bigint;
  w bigint := (select last_value from svc_qs.ring_position);
begin
  loop
    v := w;
    perform pg_advisory_xact_lock_shared(svc_qs.generation_lock_key(v / 1000));
    w := (select last_value from svc_qs.ring_position);
    exit when w = v;
  end loop;
  return (v % 1000)::smallint;
end $$;

-- Takes a producer lock on one shard of the lane (queue, priority) until commit and returns the shard:
-- first the transaction's own shard (so a transaction that enqueues twice keeps one), then any free one,
-- else it waits for its own. Rows of a lane shard commit in seq order because of this lock.
create or replace function svc_qs.lock_lane(p_queue text, p_priority smallint) returns smallint
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  n constant integer := svc_qs.shards();
  v_first integer := (txid_current() % n)::integer;
  s integer;
begin
  for i in 0 .. n - 1 loop
    s := (v_first + i) % n;
    if pg_try_advisory_xact_lock(hashtextextended('svc_qs' || ':lane:' || p_queue || ':' || p_priority || ':' || s, 0)) then
      insert into svc_qs.lanes (queue, priority, shard) values (p_queue, p_priority, s) on conflict do nothing;
      return s;
    end if;
  end loop;
  perform pg_advisory_xact_lock(hashtextextended('svc_qs' || ':lane:' || p_queue || ':' || p_priority || ':' || v_first, 0));
  insert into svc_qs.lanes (queue, priority, shard) values (p_queue, p_priority, v_first) on conflict do nothing;
  return v_first;
end $$;

-- Lane shards for the distinct (queue, priority) of jobs in `p_rows` (a jsonb array with queue and
-- priority), locked in a fixed order: {"queue:priority": shard}.
create or replace function svc_qs.lock_lanes(p_rows jsonb) returns jsonb
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  r record;
  v jsonb := '{}';
begin
  for r in select distinct x.queue, x.priority
             from jsonb_to_recordset(p_rows) as x(queue text, priority smallint) order by 1, 2 loop
    v := v || jsonb_build_object(r.queue || ':' || r.priority, svc_qs.lock_lane(r.queue, r.priority));
  end loop;
  return v;
end $$;

-- The serialization of claims on one queue (also taken by the prune's forwarding of unclaimed rows).
-- The key functions name only immutable built-in functions and carry no settings, so the planner inlines
-- them: with `set search_path`, or with `text || bigint` (the operator behind it is only stable, so an
-- immutable function using it is not inlined), each call parsed and planned its statement again (a tenth of
-- a claim's time; the batch key a twentieth of a claim and completion at the defaults). A number is cast
-- to text first.
create or replace function svc_qs.claim_lock_key(p_queue text) returns bigint language sql immutable as $$
  select hashtextextended('svc_qs' || ':claim:' || p_queue, 0)
$$;

------------------------------------------------------------------------------------------------------
-- Locks, lookups and the expansion of claim batches.
------------------------------------------------------------------------------------------------------

-- The lock producers writing into ring generation p_generation share (write_slot).
create or replace function svc_qs.generation_lock_key(p_generation bigint) returns bigint language sql immutable as $$
  select hashtextextended('svc_qs' || ':generation:' || p_generation::text, 0)
$$;

-- The lock every closer of an attempt of claim p_claim holds until it commits.
create or replace function svc_qs.batch_lock_key(p_claim bigint) returns bigint language sql immutable as $$
  select hashtextextended('svc_qs' || ':batch:' || p_claim::text, 0)
$$;

------------------------------------------------------------------------------------------------------
-- Views: each job is in exactly one of these at a time. Columns as canonical's jobs table.
------------------------------------------------------------------------------------------------------

-- The highest claimed position of each lane shard.
create or replace function svc_qs.lane_cursor(p_queue text, p_priority smallint, p_shard smallint) returns bigint
language plpgsql stable set jit = off as $$
begin
  return coalesce((select c.last_seq from svc_qs.claims c
                    where c.queue = p_queue and c.priority = p_priority and c.shard = p_shard
                    order by c.last_seq desc limit 1), 0);
end $$;

-- Whether the claimed attempt (job, lease) of claim p_claim in slot p_slot has ended.
create or replace function svc_qs.attempt_closed(p_job bigint, p_lease integer, p_slot smallint, p_claim bigint) returns boolean
language plpgsql stable set jit = off as $$
begin
  return exists (select 1 from svc_qs.closed c where c.job_id = p_job and c.lease = p_lease and c.slot = p_slot)
      or exists (select 1 from svc_qs.completions x where x.claim_id = p_claim and x.slot = p_slot and p_job = any(x.ids));
end $$;

-- The ring attempt (job, lease) with its claim, whether it is open or not: one row or none. p_slot narrows
-- the lookup to one slot when the caller knows it. It names its tables with the queue-storage schema and
-- carries no settings, so the planner inlines it into the caller's (cached) plan. attempt_closed and
-- lane_cursor hold subqueries, which keep a SQL function from being inlined: they are PL/pgSQL, whose plans
-- are cached. As SQL functions with `set search_path` all three planned their statement over every partition
-- at every call (most of a callback's resolution: the HTTP round trip's regression).
create or replace function svc_qs.ring_attempt(p_job bigint, p_lease integer, p_slot smallint default null)
returns table (slot smallint, queue text, priority smallint, shard smallint, seq bigint, claim_id bigint,
               worker text, claimed_at timestamptz, policies jsonb, ttl_ms bigint)
language sql stable as $$
  select r.slot, r.queue, r.priority, r.shard, r.seq, c.claim_id, c.worker, c.at, c.policies, c.ttl_ms
    from svc_qs.ready r
    cross join lateral (
      select c.* from svc_qs.claims c
       where c.queue = r.queue and c.priority = r.priority and c.shard = r.shard and c.slot = r.slot
         and c.last_seq >= r.seq
       order by c.last_seq limit 1) c
   where r.job_id = p_job and r.lease = p_lease - 1 and (p_slot is null or r.slot = p_slot)
     and c.first_seq <= r.seq
     and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                       and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)
   limit 1
$$;

-- Whether the attempt (job, lease) is open, and where: 'ring', or the parked row's state; null: ended.
create or replace function svc_qs.attempt_place(p_job bigint, p_lease integer) returns text
language plpgsql stable set search_path from current set jit = off as $$
begin
  return coalesce(
    (select p.state from svc_qs.parked p where p.job_id = p_job and p.lease = p_lease),
    (select 'ring' from svc_qs.ring_attempt(p_job, p_lease) a
      where not svc_qs.attempt_closed(p_job, p_lease, a.slot, a.claim_id)));
end $$;

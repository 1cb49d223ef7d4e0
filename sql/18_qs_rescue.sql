-- Queue storage: the leader's promotion of due deferred jobs, rescue of lost attempts and moving long
-- attempts out of the ring.

-- Puts deferred rows (`p_rows`, a jsonb array of deleted deferred rows) back at the end of their lanes, in
-- due-time and id order, at the ring's position; wakes their queues unless p_quiet.
create or replace function svc_qs.back_to_lanes(p_rows jsonb, p_quiet boolean default false) returns integer
language plpgsql set search_path from current set jit = off as $$
declare
  v_shards jsonb;
  v_slot smallint;
begin
  v_slot := svc_qs.write_slot();
  v_shards := svc_qs.lock_lanes(p_rows);
  insert into svc_qs.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                            run_at, created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                            attempted_by, limit_key)
  select v_slot, d.queue, d.priority, (v_shards ->> (d.queue || ':' || d.priority))::smallint,
         nextval('svc_qs.ready_seq'), d.job_id, d.kind, d.args, d.attempt, d.max_attempts, d.lease, d.run_at,
         d.created_at, d.errors, d.tags, d.metadata, d.unique_key, d.trace_context, d.claimed_at, d.attempted_at, d.attempted_by,
         d.limit_key
    from jsonb_to_recordset(p_rows) as d(job_id bigint, queue text, priority smallint, kind text, args jsonb,
           attempt integer, max_attempts integer, lease integer, run_at timestamptz, created_at timestamptz,
           errors jsonb, tags text[], metadata jsonb, unique_key text, trace_context text, claimed_at timestamptz, attempted_at timestamptz,
           attempted_by text, limit_key text)
   order by d.run_at, d.job_id;
  if not p_quiet then
    perform pg_notify(current_schema() || '_jobs', q)
       from (select distinct x ->> 'queue' as q from jsonb_array_elements(p_rows) x) y;
  end if;
  return jsonb_array_length(p_rows);
end $$;

-- Moves due scheduled and retryable jobs to the end of their lanes; wakes their queues. Returns how many.
create or replace function svc_qs.promote(p_batch integer default 1000) returns integer
language plpgsql set search_path from current set jit = off as $$
declare
  v_rows jsonb;
  v_total integer := 0;
begin
  loop
    with due as (
      select d.job_id from svc_qs.deferred d where d.run_at <= now() order by d.run_at limit p_batch
      for update skip locked),
    del as (delete from svc_qs.deferred d using due where d.job_id = due.job_id returning d.*)
    select jsonb_agg(to_jsonb(del)) into v_rows from del;
    exit when v_rows is null;
    v_total := v_total + svc_qs.back_to_lanes(v_rows);
    exit when jsonb_array_length(v_rows) < p_batch;
  end loop;
  return v_total;
end $$;

-- Rescues attempts whose runtime stopped heartbeating (rescue_after), whose hard deadline passed (plus
-- the grace: the worker enforces it first), and, with p_unknown, those of runtimes with no row at all.
-- Each is failed with the stored policy: the attempt was counted at claim, held or started. A dead
-- runtime's claims are looked at from a little before its last sweep on, and its row is written only
-- when a sweep found something (a dead runtime costs no write per tick). p_deadline_since bounds the
-- deadline scan (the caller's last scan).
create or replace function svc_qs.rescue(p_rescue_after_ms bigint, p_grace_ms bigint, p_deadline_since timestamptz,
                                         p_unknown boolean)
returns table (id bigint, kind text, state text, reason text)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  v_items jsonb := '[]';
  v_dead jsonb;
  v_ids text[];
  v_found text[];
begin
  -- A claim is a sign of life: a batch claimed within p_rescue_after_ms is left alone even when its runtime's
  -- heartbeat is stale (a worker cut off from the database claims again before its next heartbeat lands), so
  -- a sweep looks back that much further than its last one.
  select coalesce(jsonb_object_agg(w.id, coalesce(w.swept_at - interval '10 seconds'
                                                  - p_rescue_after_ms * interval '1 millisecond', '-infinity')), '{}')
    into v_dead
    from runtimes w where w.heartbeat_at < now() - p_rescue_after_ms * interval '1 millisecond';
  if p_unknown then
    select v_dead || coalesce(jsonb_object_agg(u.worker, '-infinity'::timestamptz), '{}') into v_dead
      from (
        with recursive workers as (
          (select c.worker from svc_qs.claims c order by c.worker limit 1)
          union all
          select (select c.worker from svc_qs.claims c where c.worker > w.worker order by c.worker limit 1)
            from workers w where w.worker is not null)
        select w.worker from workers w
         where w.worker is not null and not exists (select 1 from runtimes r where r.id = w.worker)) u;
  end if;
  v_ids := array(select jsonb_object_keys(v_dead));
  with dead as (select key as worker, value #>> '{}' as since from jsonb_each(v_dead)),
  batches as (
    select c.*, c.worker = any(v_ids) and c.at < now() - p_rescue_after_ms * interval '1 millisecond' as by_dead
      from (select c.* from dead d join svc_qs.claims c on c.worker = d.worker and c.at >= d.since::timestamptz
                                               and c.at < now() - p_rescue_after_ms * interval '1 millisecond'
    union
    select c.* from svc_qs.claims c
     where c.deadline_at < now() - p_grace_ms * interval '1 millisecond' and c.deadline_at >= p_deadline_since) c),
  -- Each batch's own ready rows (a range of its lane shard and slot): the rows of the batches found, never a
  -- join of every claim to every ready row.
  open_ring as (
    select r.job_id, r.lease + 1 as lease, b.slot, b.by_dead, b.worker
      from batches b
      cross join lateral (
        select r.job_id, r.lease, r.kind from svc_qs.ready r
         where r.queue = b.queue and r.priority = b.priority and r.shard = b.shard and r.slot = b.slot
           and r.seq between b.first_seq and b.last_seq
           and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                             and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)) r
     where (b.by_dead
            or b.at + ((b.policies -> r.kind ->> 'timeout_ms')::bigint + b.ttl_ms) * interval '1 millisecond'
               < now() - p_grace_ms * interval '1 millisecond')
       and not svc_qs.attempt_closed(r.job_id, r.lease + 1, b.slot, b.claim_id)),
  open_parked as (
    select p.job_id, p.lease, null::smallint as slot, p.attempted_by = any(v_ids) as by_dead, p.attempted_by as worker
      from svc_qs.parked p
     where p.state = 'running'
       and (p.attempted_by = any(v_ids) or p.deadline_at < now() - p_grace_ms * interval '1 millisecond')),
  all_open as (
    select *, case when by_dead then 'heartbeat stale: worker presumed dead' else 'deadline exceeded' end as reason
      from (select * from open_ring union all select * from open_parked) x)
  select coalesce(jsonb_agg(jsonb_build_object(
           'ord', o - 1, 'id', a.job_id, 'lease', a.lease, 'slot', a.slot, 'action', 'fail',
           'error', 'rescued: ' || a.reason, 'terminal', false, 'reason', a.reason)), '[]'),
         coalesce(array_agg(distinct a.worker) filter (where a.by_dead), '{}')
    into v_items, v_found
    from (select x.*, row_number() over () as o from all_open x limit 1000) a;
  -- Runtimes never swept, or whose sweep found attempts: every open attempt of theirs is in this batch
  -- (when it is not full), so the next sweep looks only at their later claims.
  if jsonb_array_length(v_items) < 1000 then
    update runtimes w set swept_at = now()
     where w.id = any(v_ids) and (w.swept_at is null or w.id = any(v_found));
  end if;
  if jsonb_array_length(v_items) = 0 then
    return;
  end if;
  -- Each attempt closed here is told on the cancel channel, as canonical's rescue does: a handler still
  -- running it (a process whose heartbeats stopped reaching the database while it ran) is aborted.
  return query
    with c as (select * from svc_qs.close_attempts(v_items)),
    told as (select pg_notify(current_schema() || '_cancel', c.job_id::text) from c)
    select c.job_id, x ->> 'kind', c.state, i ->> 'reason'
      from c
      join jsonb_array_elements(v_items) i on (i ->> 'ord')::integer = c.ord
      left join lateral (select svc_qs.get_job(c.job_id) as x) g on true
     where (select count(*) from told) >= 0;
end $$;

-- Moves attempts claimed more than p_after_ms ago in slot p_slot out of the ring (closure `move`, a parked
-- row in state running), so that a long job does not pin its slot. Returns how many.
create or replace function svc_qs.move_long_attempts(p_slot smallint, p_after_ms bigint) returns integer
language plpgsql set search_path from current set jit = off as $$
declare
  v_taken jsonb;
  v integer;
begin
  -- Every attempt of the slot ended (the usual case): nothing to look at job by job. Counted from the claim
  -- and closure rows only (a slot's ready rows are many more).
  if (select coalesce(sum(n), 0) from svc_qs.claims where slot = p_slot)
     - (select coalesce(sum(cardinality(ids)), 0) from svc_qs.completions where slot = p_slot)
     - (select count(*) from svc_qs.closed where slot = p_slot) <= 0 then
    return 0;
  end if;
  select svc_qs.take_ring(coalesce(jsonb_agg(jsonb_build_object('ord', o, 'id', j.job_id, 'lease', j.lease,
                                                                'action', 'move', 'slot', j.slot)), '[]'))
    into v_taken
    from (select r.job_id, r.lease + 1 as lease, c.slot, row_number() over () as o
            from svc_qs.claims c
            cross join lateral (
              select r.job_id, r.lease from svc_qs.ready r
               where r.queue = c.queue and r.priority = c.priority and r.shard = c.shard and r.slot = c.slot
                 and r.seq between c.first_seq and c.last_seq
                 and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                                   and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)) r
           where c.slot = p_slot and c.at < now() - p_after_ms * interval '1 millisecond'
             and not svc_qs.attempt_closed(r.job_id, r.lease + 1, c.slot, c.claim_id)) j;
  select count(*) into v from svc_qs.park_taken(v_taken, 'running');
  return v;
end $$;

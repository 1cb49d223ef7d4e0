-- Queue storage: closing attempts other than by completion (fail, retry, snooze, give back), and parking
-- attempts outside the ring.

------------------------------------------------------------------------------------------------------
-- Every other way an attempt ends.
------------------------------------------------------------------------------------------------------

-- Takes claimed attempts in the ring: items {ord, id, lease, action[, slot, claim, started_at, result]}. Their
-- claim batches are locked in ascending order, then a new statement writes a closed row for each attempt
-- that no completion ended (the closed primary key makes the first writer win). An item that names its
-- claim (a worker's outcome) takes the attempt only from that claim: a claim lost in a server crash and
-- made again since has another id (ADR 021). Returns what it took: the item's ord with the job's body, the
-- attempt and its claim id.
create or replace function svc_qs.take_ring(p_items jsonb) returns jsonb
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_att jsonb;
  v_out jsonb;
  v_ord jsonb;
begin
  select jsonb_agg(jsonb_build_object('ord', i.ord, 'id', i.id, 'lease', i.lease, 'action', i.action,
                                      'slot', a.slot, 'claim', a.claim_id, 'started_at', i.started_at,
                                      'result', i.result)
                   order by a.claim_id)
    into v_att
    from jsonb_to_recordset(p_items) as i(ord integer, id bigint, lease integer, action text, slot smallint,
                                          claim bigint, started_at timestamptz, result jsonb)
    cross join lateral svc_qs.ring_attempt(i.id, i.lease, i.slot) a
   where i.claim is null or a.claim_id = i.claim;
  if v_att is null then
    return '[]';
  end if;
  -- {"job id:lease": the item's ord}
  v_ord := (select jsonb_object_agg((x ->> 'id') || ':' || (x ->> 'lease'), x -> 'ord') from jsonb_array_elements(v_att) x);
  perform pg_advisory_xact_lock(svc_qs.batch_lock_key(b.claim))
     from (select distinct (x ->> 'claim')::bigint as claim from jsonb_array_elements(v_att) x order by 1) b;
  with cl as (
    insert into svc_qs.closed (slot, job_id, lease, outcome, started_at, result)
    select a.slot, a.id, a.lease, a.action, a.started_at, case when a.action = 'complete' then coalesce(a.result, 'null') end
      from jsonb_to_recordset(v_att) as a(ord integer, id bigint, lease integer, action text, slot smallint,
                                          claim bigint, started_at timestamptz, result jsonb)
     where (select true from svc_qs.completions x where x.claim_id = a.claim and x.slot = a.slot
              and a.id = any(x.ids) limit 1) is null
    on conflict do nothing
    returning slot, job_id, lease, started_at)
  select jsonb_agg(jsonb_build_object(
           'ord', (v_ord ->> (cl.job_id || ':' || cl.lease))::integer,
           'job_id', cl.job_id, 'lease', cl.lease, 'source', 'ring', 'slot', cl.slot, 'claim_id', j.claim_id,
           'queue', j.queue, 'priority', j.priority, 'kind', j.kind, 'args', j.args, 'attempt', j.attempt,
           'max_attempts', j.max_attempts, 'run_at', j.run_at, 'created_at', j.created_at, 'errors', j.errors,
           'tags', j.tags, 'metadata', j.metadata, 'unique_key', j.unique_key, 'limit_key', j.limit_key,
           'trace_context', j.trace_context,
           'claimed_at', j.claimed_at, 'attempted_at', coalesce(cl.started_at, j.claimed_at), 'attempted_by', j.worker,
           'deadline_at', j.deadline_at, 'effective_max_attempts', j.effective_max_attempts,
           'retry_delay_ms', j.retry_delay_ms))
    into v_out
    from cl
    cross join lateral (select j.* from svc_qs.claimed_jobs j
                         where j.job_id = cl.job_id and j.lease = cl.lease and j.slot = cl.slot limit 1) j;
  return coalesce(v_out, '[]');
end $$;

-- take_ring, then the attempts moved out of the ring (parked rows, deleted). Same items and result.
create or replace function svc_qs.take(p_items jsonb) returns jsonb
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_ring jsonb := svc_qs.take_ring(p_items);
  v_parked jsonb;
begin
  if jsonb_array_length(v_ring) < jsonb_array_length(p_items) then
    -- A new statement: it sees parks committed while the first one waited.
    with got as (select coalesce(jsonb_object_agg(x ->> 'ord', true), '{}') as o from jsonb_array_elements(v_ring) x),
    inp as (
      select i.* from jsonb_to_recordset(p_items) as i(ord integer, id bigint, lease integer, claim bigint), got
       where not (got.o ? i.ord::text)),
    del as (
      delete from svc_qs.parked p using inp i
       where p.job_id = i.id and p.lease = i.lease
         and (i.claim is null or p.claim_id is null or p.claim_id = i.claim)
      returning i.ord, p.*)
    select jsonb_agg(jsonb_build_object(
             'ord', d.ord, 'job_id', d.job_id, 'lease', d.lease, 'source', 'parked', 'queue', d.queue,
             'priority', d.priority, 'kind', d.kind, 'args', d.args, 'attempt', d.attempt,
             'max_attempts', d.max_attempts, 'run_at', d.run_at, 'created_at', d.created_at, 'errors', d.errors,
             'tags', d.tags, 'metadata', d.metadata, 'unique_key', d.unique_key, 'limit_key', d.limit_key,
             'trace_context', d.trace_context,
             'claimed_at', d.claimed_at, 'attempted_at', coalesce(d.attempted_at, d.claimed_at),
             'attempted_by', d.attempted_by, 'deadline_at', d.deadline_at,
             'effective_max_attempts', d.effective_max_attempts, 'retry_delay_ms', d.retry_delay_ms))
      into v_parked
      from del d;
  end if;
  return v_ring || coalesce(v_parked, '[]');
end $$;

-- The one path by which an attempt ends: takes the attempts (`take`) and applies each item's action.
--   complete  {result, keep, started_at}: completed (in the ring: its closed row keeps the result; an
--             attempt moved out of the ring: a history row unless keep is false)
--   fail      {error, terminal, delay_ms}: failed when terminal or the attempt was the last the stored
--             policy allows, else retryable after delay_ms (given), the stored delay, or the default
--   snooze    {delay_ms}: scheduled again, the attempt given back
--   cancel    : cancelled (the worker is told through the cancel channel)
--   give_back : available again at the end of its lane with its run_at, the attempt refunded (a held
--             job given back by a graceful shutdown, its TTL or a pause)
-- Returns the items applied with the job's new state.
create or replace function svc_qs.close_attempts(p_items jsonb)
returns table (ord integer, job_id bigint, state text)
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  v_taken jsonb := svc_qs.take(p_items);
  v_back jsonb;
  v_shards jsonb;
  v_slot smallint;
begin
  if jsonb_array_length(v_taken) = 0 then
    return;
  end if;
  return query
  with t as (
    select * from jsonb_to_recordset(v_taken) as x(ord integer, job_id bigint, lease integer, queue text,
      priority smallint, kind text, args jsonb, attempt integer, max_attempts integer, run_at timestamptz,
      created_at timestamptz, errors jsonb, tags text[], metadata jsonb, unique_key text, trace_context text,
      claimed_at timestamptz, attempted_at timestamptz, attempted_by text, effective_max_attempts integer, retry_delay_ms bigint,
      source text, limit_key text)),
  i as (
    select * from jsonb_to_recordset(p_items) as y(ord integer, action text, result jsonb, error text,
      terminal boolean, delay_ms bigint, keep boolean)),
  d as (
    select t.*, i.action, i.result, i.keep,
           case when i.action = 'fail'
                then coalesce(i.terminal, false)
                     or t.attempt >= least(t.max_attempts, coalesce(t.effective_max_attempts, t.max_attempts))
                else false end as final,
           case when i.action = 'fail' then t.errors || jsonb_build_array(jsonb_build_object(
                  'attempt', t.attempt, 'at', iso(now()), 'error', i.error,
                  'terminal', coalesce(i.terminal, false)
                    or t.attempt >= least(t.max_attempts, coalesce(t.effective_max_attempts, t.max_attempts))))
                else t.errors end as new_errors,
           greatest(0, coalesce(i.delay_ms, t.retry_delay_ms, backoff_ms(t.attempt))) as delay
      from t join i using (ord)),
  s as (
    select d.*, case d.action
                  when 'complete' then 'completed'
                  when 'fail' then case when d.final then 'failed' else 'retryable' end
                  when 'snooze' then 'scheduled'
                  when 'cancel' then 'cancelled'
                  when 'give_back' then 'available' end as new_state
      from d),
  h as (
    insert into svc_qs.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                max_attempts, effective_max_attempts, run_at, created_at, claimed_at, attempted_at,
                                attempted_by, errors, tags, metadata, result, unique_key, trace_context, limit_key)
    select case when s.new_state = 'completed' then 'completed' else 'failed' end, now(), s.job_id, s.lease,
           s.new_state, s.queue, s.priority, s.kind, s.args, s.attempt, s.max_attempts, s.effective_max_attempts,
           s.run_at, s.created_at, s.claimed_at, s.attempted_at, s.attempted_by, s.new_errors, s.tags, s.metadata,
           case when s.new_state = 'completed' then s.result end, s.unique_key, s.trace_context, s.limit_key
      from s where s.new_state in ('failed', 'cancelled')
                or (s.new_state = 'completed' and s.source = 'parked' and coalesce(s.keep, true))
    returning job_id),
  df as (
    insert into svc_qs.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                                 created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                                 attempted_by, effective_max_attempts, limit_key)
    select s.job_id, s.new_state, now() + s.delay * interval '1 millisecond', s.queue, s.priority, s.kind, s.args,
           case when s.action = 'snooze' then s.attempt - 1 else s.attempt end, s.max_attempts, s.lease,
           s.created_at, s.new_errors, s.tags, s.metadata, s.unique_key, s.trace_context, s.claimed_at, s.attempted_at,
           s.attempted_by, s.effective_max_attempts, s.limit_key
      from s where s.new_state in ('retryable', 'scheduled')
    returning job_id),
  uk as (
    delete from svc_qs.unique_keys k using s
     where k.unique_key = s.unique_key and k.job_id = s.job_id and s.new_state in ('completed', 'failed', 'cancelled')
    returning k.job_id),
  told as (select pg_notify(current_schema() || '_cancel', s.job_id::text) from s where s.new_state = 'cancelled')
  select s.ord, s.job_id, s.new_state
    from s
   where (select count(*) from told) >= 0 and (select count(*) from h) >= 0 and (select count(*) from df) >= 0
     and (select count(*) from uk) >= 0;

  -- Given back: new ready rows at the end of their lanes (lane locks taken in a fixed order).
  select jsonb_agg(t) into v_back
    from jsonb_array_elements(v_taken) t
    join jsonb_to_recordset(p_items) as y(ord integer, action text) on y.ord = (t ->> 'ord')::integer
   where y.action = 'give_back';
  if v_back is not null then
    v_slot := svc_qs.write_slot();
    v_shards := svc_qs.lock_lanes(v_back);
    insert into svc_qs.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, limit_key)
    select v_slot, b.queue, b.priority, (v_shards ->> (b.queue || ':' || b.priority))::smallint,
           nextval('svc_qs.ready_seq'), b.job_id, b.kind, b.args, b.attempt - 1, b.max_attempts, b.lease, b.run_at,
           b.created_at, b.errors, b.tags, b.metadata, b.unique_key, b.trace_context, b.limit_key
      from jsonb_to_recordset(v_back) as b(job_id bigint, lease integer, queue text, priority smallint, kind text,
             args jsonb, run_at timestamptz, attempt integer, max_attempts integer, created_at timestamptz, errors jsonb, tags text[],
             metadata jsonb, unique_key text, trace_context text, limit_key text);
    perform pg_notify(current_schema() || '_jobs', q) from (select distinct b ->> 'queue' as q from jsonb_array_elements(v_back) b) x;
  end if;
end $$;

-- close_attempts, then each closed job as it is after the closure (get_job, in a later statement so that it
-- sees what the closure wrote). One call: a caller that retries after an error never finds the closure done
-- and its answer lost (a failure's event and metric need the job as it became).
create or replace function svc_qs.close_attempts_read(p_items jsonb)
returns table (ord integer, job_id bigint, state text, job jsonb)
language plpgsql set search_path from current set jit = off as $$
declare
  v_closed jsonb;
begin
  select coalesce(jsonb_agg(jsonb_build_object('ord', c.ord, 'job_id', c.job_id, 'state', c.state)), '[]')
    into v_closed
    from svc_qs.close_attempts(p_items) c;
  return query
    select (x ->> 'ord')::integer, (x ->> 'job_id')::bigint, x ->> 'state', get_job((x ->> 'job_id')::bigint)
      from jsonb_array_elements(v_closed) x;
end $$;

-- Parked rows (state p_state) for attempts take_ring took out of the ring; returns their job ids.
create or replace function svc_qs.park_taken(p_taken jsonb, p_state text) returns setof bigint
language plpgsql set search_path from current set jit = off as $$
begin
  -- PL/pgSQL, so the plan is cached (a SQL function with settings is planned at every call).
  return query
    insert into svc_qs.parked (job_id, lease, state, queue, priority, kind, args, attempt, max_attempts, run_at,
                               created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                               attempted_by, deadline_at, prefetched, effective_max_attempts, retry_delay_ms, limit_key,
                               claim_id, waiter)
    select t.job_id, t.lease, p_state, t.queue, t.priority, t.kind, t.args, t.attempt, t.max_attempts,
           t.run_at, t.created_at, t.errors, t.tags, t.metadata, t.unique_key, t.trace_context, t.claimed_at, t.attempted_at,
           t.attempted_by, t.deadline_at, false, t.effective_max_attempts, t.retry_delay_ms, t.limit_key, t.claim_id,
           -- what waits for the callback ('http' or 'in_process'): a concurrency limit counts HTTP parks only
           -- when the queue says so (ADR 019)
           case when p_state = 'waiting_external' then
             (select c.kind from svc_qs.callbacks c where c.job_id = t.job_id and c.lease = t.lease and c.state = 'pending'
               order by c.created_at desc limit 1) end
      from jsonb_to_recordset(p_taken) as t(job_id bigint, lease integer, queue text, priority smallint, kind text,
             args jsonb, attempt integer, max_attempts integer, run_at timestamptz, created_at timestamptz,
             errors jsonb, tags text[], metadata jsonb, unique_key text, trace_context text,
             claimed_at timestamptz, attempted_at timestamptz, attempted_by text, deadline_at timestamptz, effective_max_attempts integer,
             retry_delay_ms bigint, limit_key text, claim_id bigint)
    returning job_id;
end $$;

-- Parks attempts in waiting_external until their callback, unless the callback is no longer pending:
-- an attempt in the ring is closed (`park`) and gets a parked row; a parked running attempt (a resumed
-- in-process waiter) changes state. Items {id, lease, callback_id[, slot]}; returns the ids parked.
-- Committed without waiting for the WAL flush (a park lost in a crash leaves the attempt running in the
-- ring, and its runtime's rescue retries it).
create or replace function svc_qs.park(p_items jsonb) returns setof bigint
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_items jsonb;
  v_taken jsonb;
  v_done bigint[];
begin
  perform set_config('synchronous_commit', 'off', true);
  select jsonb_agg(x || jsonb_build_object('ord', o - 1, 'action', 'park'))
    into v_items
    from jsonb_array_elements(p_items) with ordinality as e(x, o)
   where exists (select 1 from svc_qs.callbacks c
                  where c.id = (x ->> 'callback_id')::uuid and c.state = 'pending'
                    and c.job_id = (x ->> 'id')::bigint and c.lease = (x ->> 'lease')::integer);
  if v_items is null then
    return;
  end if;
  v_taken := svc_qs.take_ring(v_items);
  select coalesce(array_agg(x), '{}') into v_done from svc_qs.park_taken(v_taken, 'waiting_external') x;
  return query select unnest(v_done);
  -- Attempts already out of the ring (a resumed in-process waiter waits again): a new statement.
  return query
    update svc_qs.parked p set state = 'waiting_external'
      from jsonb_to_recordset(v_items) as i(id bigint, lease integer, claim bigint)
     where p.job_id = i.id and p.lease = i.lease and p.state = 'running' and not (i.id = any(v_done))
       and (i.claim is null or p.claim_id is null or p.claim_id = i.claim)
    returning p.job_id;
end $$;

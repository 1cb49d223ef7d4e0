-- Queue storage: enqueue (ready rows for due jobs, deferred rows for later ones, unique keys).

-- The batch enqueue takes few steps (bench/probes/enqueue_split.ts; ADR 008): the lanes of a batch are
-- locked from its distinct (queue, priority) pairs instead of a copy of every job's JSON, the outcome of each input is kept in arrays instead of a JSON object per row, and the
-- inserted jobs are returned as one set; only duplicates still go one by one.

-- The batch insert of queue storage, as the TypeScript client calls it: the input is json (checked by a
-- lexer, each field converted once; jsonb input was parsed into a tree first, a fifth of a 1,000-job batch's
-- time), and the answer is one row: the ids in input order (null for a duplicate), the time of the insert,
-- the unique keys (a JSON array, null when no input has one) and the duplicates' jobs ({ord, existing}, ord
-- from 0). The
-- client knows the rest of each job; a row per job cost the server and the client more than the insert.
create or replace function svc_qs.enqueue_batch(p_jobs json)
returns table (ids bigint[], created_at timestamptz, keys jsonb, dups jsonb)
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  v_now timestamptz := now();
  v_slot smallint := svc_qs.write_slot();
  v_shards jsonb;
  v_id bigint[];
  v_key text[];
  v_dup boolean[];
  v_dups jsonb;
  v_woken bigint;
  v_deferred bigint;
  v_ids regclass := pg_get_serial_sequence(quote_ident(current_schema()) || '.jobs', 'id')::regclass;
  dup record;
  r record;
  v_existing jsonb;
  v_canonical boolean := (select transition <> 'active' from storage_state);
begin
  -- Only the (queue, priority) pairs of the jobs due now: their lanes are locked in one order.
  v_shards := svc_qs.lock_lanes((
    select coalesce(jsonb_agg(jsonb_build_object('queue', l.queue, 'priority', l.priority)), '[]')
      from (select distinct coalesce(x.queue, 'default') as queue, coalesce(x.priority, 2) as priority
              from json_to_recordset(p_jobs) as x(queue text, priority smallint, run_at timestamptz)
             where coalesce(x.run_at, v_now) <= v_now) l));
  with inp0 as (
    select i.*, (i.o - 1)::integer as ord, nextval(v_ids) as id, coalesce(i.run_at, v_now) as due
      from rows from (json_to_recordset(p_jobs) as (kind text, queue text, args jsonb, priority smallint,
             run_at timestamptz, max_attempts integer, tags text[], metadata jsonb, unique_key text,
             "unique" jsonb, trace_context text, limit_key text)) with ordinality
             as i(kind, queue, args, priority, run_at, max_attempts, tags, metadata, unique_key, "unique",
                  trace_context, limit_key, o)),
  -- A field the client left at its default (queue 'default', priority 2, max_attempts 25) is not sent.
  inp as (
    select i.kind, coalesce(i.queue, 'default') as queue, i.args, coalesce(i.priority, 2) as priority,
           coalesce(i.max_attempts, 25) as max_attempts, i.tags, i.metadata, i.trace_context, i.limit_key,
           i.ord, i.id, i.due,
           coalesce(i.unique_key, case when i."unique" is not null
             then opts_unique_key(i.kind, i.args, coalesce(i.queue, 'default'), i.due, jsonb_build_object('unique', i."unique")) end)
             as unique_key
      from inp0 i),
  -- Until the transition is active, a key held by an unfinished canonical job counts too.
  ck as (
    select j.unique_key from jobs j
     where v_canonical and j.unique_key in (select i.unique_key from inp i where i.unique_key is not null)
       and j.state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable')),
  uk as (
    insert into svc_qs.unique_keys (unique_key, job_id)
    select i.unique_key, i.id from inp i
     where i.unique_key is not null and not exists (select 1 from ck where ck.unique_key = i.unique_key)
    on conflict do nothing
    returning unique_key, job_id),
  ok as (
    select i.* from inp i
     where i.unique_key is null or exists (select 1 from uk where uk.job_id = i.id)),
  r as (
    insert into svc_qs.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, limit_key)
    select v_slot, o.queue, o.priority, (v_shards ->> (o.queue || ':' || o.priority))::smallint,
           nextval('svc_qs.ready_seq'), o.id, o.kind, o.args, 0, o.max_attempts, 0, o.due, v_now, '[]',
           coalesce(o.tags, '{}'), coalesce(o.metadata, '{}'), o.unique_key, o.trace_context, o.limit_key
      from ok o where o.due <= v_now
     order by o.ord
    returning queue),
  d as (
    insert into svc_qs.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                                 created_at, errors, tags, metadata, unique_key, trace_context, limit_key)
    select o.id, 'scheduled', o.due, o.queue, o.priority, o.kind, o.args, 0, o.max_attempts, 0, v_now, '[]',
           coalesce(o.tags, '{}'), coalesce(o.metadata, '{}'), o.unique_key, o.trace_context, o.limit_key
      from ok o where o.due > v_now
    returning job_id),
  woken as (select pg_notify(current_schema() || '_jobs', q.queue) from (select distinct queue from r) q)
  -- The outcome of each input, in arrays, from one sort by input order; counting woken and d runs them.
  select array_agg(i.id), array_agg(i.unique_key),
         array_agg(i.unique_key is not null and not exists (select 1 from uk where uk.job_id = i.id)),
         (select count(*) from woken), (select count(*) from d)
    into v_id, v_key, v_dup, v_woken, v_deferred
    from (select * from inp order by ord) i;
  -- Duplicates: the job that holds the key, read in a new statement (it may have committed meanwhile).
  -- When that job finished in between (its key is free again), the job is enqueued after all.
  for dup in select (t.o - 1)::integer as o, t.k from unnest(v_key, v_dup) with ordinality as t(k, dup, o)
              where t.dup order by t.o loop
    v_id[dup.o + 1] := null;
    v_existing := coalesce(
      svc_qs.get_job((select k.job_id from svc_qs.unique_keys k where k.unique_key = dup.k)),
      case when v_canonical then canonical_get_job((
        select j.id from jobs j where j.unique_key = dup.k
           and j.state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') limit 1)) end);
    if v_existing is null then
      select * into r from svc_qs.enqueue_batch(json_build_array(p_jobs -> dup.o));
      if r.dups is null then
        v_id[dup.o + 1] := r.ids[1];
        v_key[dup.o + 1] := r.keys ->> 0;
      else
        v_existing := r.dups -> 0 -> 'existing';
      end if;
    end if;
    if v_existing is not null then
      v_dups := coalesce(v_dups, '[]') || jsonb_build_array(jsonb_build_object('ord', dup.o, 'existing', v_existing));
    end if;
  end loop;
  return query select v_id, v_now,
                      case when exists (select 1 from unnest(v_key) k where k is not null) then to_jsonb(v_key) end,
                      v_dups;
end $$;

-- The batch insert as a set of rows (the SQL producer API's one job goes through it).
create or replace function svc_qs.enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  b record;
begin
  select * into b from svc_qs.enqueue_batch(p_jobs::json);
  return query
    select (t.o - 1)::integer, t.id,
           case when coalesce((p_jobs -> (t.o - 1)::integer ->> 'run_at')::timestamptz, b.created_at) > b.created_at
                then 'scheduled' else 'available' end,
           coalesce((p_jobs -> (t.o - 1)::integer ->> 'run_at')::timestamptz, b.created_at), b.created_at,
           b.keys ->> (t.o - 1)::integer, d.existing is not null, d.existing
      from unnest(b.ids) with ordinality as t(id, o)
      left join lateral (select x -> 'existing' as existing from jsonb_array_elements(b.dups) x
                          where (x ->> 'ord')::integer = t.o - 1) d on true;
end $$;

-- The SQL producer API on queue storage (one job): {job, duplicate}.
create or replace function svc_qs.enqueue_one(p_kind text, p_args jsonb, p_opts jsonb)
returns table (job jsonb, duplicate boolean) language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  i jsonb := enqueue_input(p_kind, p_args, p_opts);
  r record;
begin
  select * into r from svc_qs.enqueue_jobs(jsonb_build_array(jsonb_build_object(
    'kind', p_kind, 'queue', i ->> 'queue', 'args', p_args, 'priority', (i ->> 'priority')::smallint,
    'run_at', i -> 'run_at', 'max_attempts', (i ->> 'max_attempts')::integer, 'tags', i -> 'tags',
    'metadata', i -> 'metadata', 'unique_key', i ->> 'unique_key', 'trace_context', i ->> 'trace_context',
    'limit_key', i ->> 'limit_key')));
  if r.duplicate then
    return query select r.existing, true;
  else
    return query select svc_qs.get_job(r.id), false;
  end if;
end $$;

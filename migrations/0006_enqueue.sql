-- svc schema version 6: a batch enqueue in fewer steps on both engines (bench/probes/enqueue_split.ts; ADR 008).
--
-- Queue storage: the lanes of a batch are locked from its distinct (queue, priority) pairs instead of a copy of
-- every job's JSON, the outcome of each input is kept in arrays instead of a JSON object per row, and the
-- inserted jobs are returned as one set; only duplicates still go one by one.
-- Canonical: the same set return, and the trigger that moves rows an older producer inserts into canonical's
-- jobs table during the transition runs once per statement instead of once per row.
-- Template parameters as in 0004 ({{qs}}: the queue-storage schema).

-- The batch insert of queue storage (see 0004).
create or replace function {{qs}}.enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_now timestamptz := now();
  v_slot smallint := {{qs}}.current_slot();
  v_shards jsonb;
  v_ord integer[];
  v_id bigint[];
  v_due timestamptz[];
  v_key text[];
  v_dup boolean[];
  v_woken bigint;
  v_deferred bigint;
  v_ids regclass := pg_get_serial_sequence(quote_ident(current_schema()) || '.jobs', 'id')::regclass;
  dup record;
  r record;
  v_existing jsonb;
  v_canonical boolean := (select transition <> 'active' from storage_state);
begin
  -- Only the (queue, priority) pairs of the jobs due now: their lanes are locked in one order.
  v_shards := {{qs}}.lock_lanes((
    select coalesce(jsonb_agg(jsonb_build_object('queue', l.queue, 'priority', l.priority)), '[]')
      from (select distinct x.queue, x.priority
              from jsonb_to_recordset(p_jobs) as x(queue text, priority smallint, run_at timestamptz)
             where coalesce(x.run_at, v_now) <= v_now) l));
  with inp0 as (
    select i.*, (i.o - 1)::integer as ord, nextval(v_ids) as id, coalesce(i.run_at, v_now) as due
      from rows from (jsonb_to_recordset(p_jobs) as (kind text, queue text, args jsonb, priority smallint,
             run_at timestamptz, max_attempts integer, tags text[], metadata jsonb, unique_key text,
             "unique" jsonb, trace_context text)) with ordinality
             as i(kind, queue, args, priority, run_at, max_attempts, tags, metadata, unique_key, "unique",
                  trace_context, o)),
  inp as (
    select i.kind, i.queue, i.args, i.priority, i.max_attempts, i.tags, i.metadata, i.trace_context, i.ord, i.id,
           i.due,
           coalesce(i.unique_key, case when i."unique" is not null
             then opts_unique_key(i.kind, i.args, i.queue, i.due, jsonb_build_object('unique', i."unique")) end)
             as unique_key
      from inp0 i),
  -- Until the transition is active, a key held by an unfinished canonical job counts too.
  ck as (
    select j.unique_key from jobs j
     where v_canonical and j.unique_key in (select i.unique_key from inp i where i.unique_key is not null)
       and j.state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable')),
  uk as (
    insert into {{qs}}.unique_keys (unique_key, job_id)
    select i.unique_key, i.id from inp i
     where i.unique_key is not null and not exists (select 1 from ck where ck.unique_key = i.unique_key)
    on conflict do nothing
    returning unique_key, job_id),
  ok as (
    select i.* from inp i
     where i.unique_key is null or exists (select 1 from uk where uk.job_id = i.id)),
  r as (
    insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context)
    select v_slot, o.queue, o.priority, (v_shards ->> (o.queue || ':' || o.priority))::smallint,
           nextval('{{qs}}.ready_seq'), o.id, o.kind, o.args, 0, o.max_attempts, 0, o.due, v_now, '[]',
           coalesce(o.tags, '{}'), coalesce(o.metadata, '{}'), o.unique_key, o.trace_context
      from ok o where o.due <= v_now
     order by o.ord
    returning queue),
  d as (
    insert into {{qs}}.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                                 created_at, errors, tags, metadata, unique_key, trace_context)
    select o.id, 'scheduled', o.due, o.queue, o.priority, o.kind, o.args, 0, o.max_attempts, 0, v_now, '[]',
           coalesce(o.tags, '{}'), coalesce(o.metadata, '{}'), o.unique_key, o.trace_context
      from ok o where o.due > v_now
    returning job_id),
  woken as (select pg_notify(current_schema() || '_jobs', q.queue) from (select distinct queue from r) q)
  -- The outcome of each input, in arrays (cheaper than an object per row); counting woken and d runs them.
  select array_agg(i.ord order by i.ord), array_agg(i.id order by i.ord), array_agg(i.due order by i.ord),
         array_agg(i.unique_key order by i.ord),
         array_agg(i.unique_key is not null and not exists (select 1 from uk where uk.job_id = i.id) order by i.ord),
         (select count(*) from woken), (select count(*) from d)
    into v_ord, v_id, v_due, v_key, v_dup, v_woken, v_deferred
    from inp i;
  -- The jobs inserted, in one set (the caller orders by ord).
  return query select t.o, t.id, case when t.due > v_now then 'scheduled' else 'available' end, t.due, v_now, t.k,
                      false, null::jsonb
                 from unnest(v_ord, v_id, v_due, v_key, v_dup) as t(o, id, due, k, dup) where not t.dup;
  -- Duplicates: the job that holds the key, read in a new statement (it may have committed meanwhile).
  -- When that job finished in between (its key is free again), the job is enqueued after all.
  for dup in select t.o, t.id, t.due, t.k from unnest(v_ord, v_id, v_due, v_key, v_dup) as t(o, id, due, k, dup)
              where t.dup order by t.o loop
    v_existing := coalesce(
      {{qs}}.get_job((select k.job_id from {{qs}}.unique_keys k where k.unique_key = dup.k)),
      case when v_canonical then canonical_get_job((
        select j.id from jobs j where j.unique_key = dup.k
           and j.state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') limit 1)) end);
    if v_existing is null then
      select * into r from {{qs}}.enqueue_jobs(jsonb_build_array(p_jobs -> dup.o));
      return query select dup.o, r.id, r.state, r.run_at, r.created_at, r.unique_key, r.duplicate, r.existing;
    else
      return query select dup.o, dup.id, case when dup.due > v_now then 'scheduled' else 'available' end, dup.due,
                          v_now, dup.k, true, v_existing;
    end if;
  end loop;
end $$;

-- The batch insert of canonical (see 0004).
create or replace function canonical_enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_out jsonb;
  x jsonb;
  v_existing jsonb;
begin
  with inp as (
    select i.kind, i.queue, i.args, i.priority, i.max_attempts, i.tags, i.metadata, i.trace_context,
           (i.o - 1)::integer as ord, coalesce(i.run_at, now()) as due,
           coalesce(i.unique_key, case when i."unique" is not null
             then opts_unique_key(i.kind, i.args, i.queue, coalesce(i.run_at, now()),
                                  jsonb_build_object('unique', i."unique")) end) as unique_key
      from rows from (jsonb_to_recordset(p_jobs) as (kind text, queue text, args jsonb, priority smallint,
             run_at timestamptz, max_attempts integer, tags text[], metadata jsonb, unique_key text,
             "unique" jsonb, trace_context text)) with ordinality
             as i(kind, queue, args, priority, run_at, max_attempts, tags, metadata, unique_key, "unique",
                  trace_context, o)),
  ins as (
    insert into jobs (kind, queue, args, state, priority, run_at, max_attempts, tags, metadata, unique_key,
                      trace_context)
    select i.kind, i.queue, i.args, case when i.due > now() then 'scheduled' else 'available' end::job_state,
           i.priority, i.due, i.max_attempts, coalesce(i.tags, '{}'), coalesce(i.metadata, '{}'), i.unique_key,
           i.trace_context
      from inp i order by i.ord
    on conflict (unique_key) where unique_key is not null
      and state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') do nothing
    returning id, state, run_at, created_at, unique_key),
  -- Inserted rows take ids in input order: the k-th inserted row is the k-th input that was inserted,
  -- which is every input without a key and the first input of each key that got in.
  cand as (
    select i.*, row_number() over (partition by i.unique_key order by i.ord) as nth from inp i),
  got as (
    select c.ord from cand c
     where c.unique_key is null or (c.nth = 1 and exists (select 1 from ins where ins.unique_key = c.unique_key))),
  pairs as (
    select g.ord, n.* from (select g.ord, row_number() over (order by g.ord) as k from got g) g
      join (select ins.*, row_number() over (order by ins.id) as k from ins) n using (k)),
  woken as (select pg_notify(current_schema() || '_jobs', q.queue)
              from (select distinct i.queue from inp i join pairs p using (ord) where p.state = 'available') q)
  select jsonb_agg(jsonb_build_object(
           'ord', i.ord, 'id', p.id, 'state', p.state, 'run_at', p.run_at, 'created_at', p.created_at,
           'unique_key', i.unique_key, 'duplicate', p.id is null) order by i.ord)
         || jsonb_build_array(jsonb_build_object('woken', (select count(*) from woken)))
    into v_out
    from inp i left join pairs p using (ord);
  -- The jobs inserted, in one set (the caller orders by ord).
  return query select (e ->> 'ord')::integer, (e ->> 'id')::bigint, e ->> 'state', (e ->> 'run_at')::timestamptz,
                      (e ->> 'created_at')::timestamptz, e ->> 'unique_key', false, null::jsonb
                 from jsonb_array_elements(v_out) e where e ? 'ord' and not (e ->> 'duplicate')::boolean;
  for x in select e from jsonb_array_elements(v_out) e
            where e ? 'ord' and (e ->> 'duplicate')::boolean order by (e ->> 'ord')::integer loop
    -- A new statement: the job that holds the key may have committed meanwhile.
    v_existing := canonical_get_job((select j.id from jobs j where j.unique_key = x ->> 'unique_key'
                                       and j.state in ('scheduled', 'available', 'running', 'waiting_external',
                                                       'retryable') limit 1));
    if v_existing is null then
      return query select (x ->> 'ord')::integer, r.id, r.state, r.run_at, r.created_at, r.unique_key, r.duplicate,
                          r.existing
                     from canonical_enqueue_jobs(jsonb_build_array(p_jobs -> ((x ->> 'ord')::integer))) r;
    else
      return query select (x ->> 'ord')::integer, null::bigint, x ->> 'state', (x ->> 'run_at')::timestamptz,
                          (x ->> 'created_at')::timestamptz, x ->> 'unique_key', true, v_existing;
    end if;
  end loop;
end $$;

-- Once per INSERT statement: while mixed (and after), the rows an older producer inserted into canonical's
-- jobs table move to queue storage at once, keeping their ids. A unique key already held in queue storage
-- raises unique_violation, as canonical's own index would.
create function canonical_jobs_moved_statement() returns trigger
language plpgsql set search_path from current as $$
declare
  v_taken text;
begin
  if (select transition from storage_state) in ('mixed_transition', 'active') then
    select n.unique_key into v_taken from moved_rows n
     where n.unique_key is not null and n.state in ('scheduled', 'available', 'retryable')
       and exists (select 1 from {{qs}}.unique_keys k where k.unique_key = n.unique_key)
     limit 1;
    if v_taken is not null then
      raise exception 'duplicate key value violates unique constraint on the unique key %', v_taken
        using errcode = 'unique_violation';
    end if;
    perform {{qs}}.adopt(array(select n.id from moved_rows n order by n.id));
  end if;
  return null;
end $$;

drop trigger jobs_moved_to_queue_storage on jobs;
drop function canonical_jobs_moved();
create trigger jobs_moved_to_queue_storage after insert on jobs
  referencing new table as moved_rows
  for each statement execute function canonical_jobs_moved_statement();

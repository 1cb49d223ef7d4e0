-- The canonical engine's enqueue, one job and many.

-- The canonical insert of the SQL producer API (one job).
create or replace function canonical_enqueue(p_kind text, p_args jsonb, p_opts jsonb)
returns table (job jsonb, duplicate boolean) language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  i jsonb := enqueue_input(p_kind, p_args, p_opts);
  v_row jobs;
  v_key text := i ->> 'unique_key';
begin
  insert into jobs (kind, queue, args, state, priority, max_attempts, run_at, tags, metadata, unique_key, trace_context,
                    limit_key)
  values (p_kind, i ->> 'queue', p_args,
          case when (i ->> 'run_at')::timestamptz > now() then 'scheduled' else 'available' end::job_state,
          (i ->> 'priority')::smallint, (i ->> 'max_attempts')::integer, (i ->> 'run_at')::timestamptz,
          array(select jsonb_array_elements_text(i -> 'tags')), i -> 'metadata', v_key, i ->> 'trace_context',
          i ->> 'limit_key')
  on conflict (unique_key) where unique_key is not null
    and state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') do nothing
  returning * into v_row;
  if v_row.id is null then
    select * into v_row from jobs where unique_key = v_key
      and state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable');
    return query select job_json(to_jsonb(v_row)), true;
    return;
  end if;
  if v_row.state = 'available' then
    perform pg_notify(current_schema() || '_jobs', v_row.queue);
  end if;
  return query select job_json(to_jsonb(v_row)), false;
end $$;

-- The batch insert of canonical.
create or replace function canonical_enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  v_out jsonb;
  x jsonb;
  v_existing jsonb;
begin
  -- A field the client left at its default (queue 'default', priority 2, max_attempts 25) is not sent.
  with inp as (
    select i.kind, coalesce(i.queue, 'default') as queue, i.args, coalesce(i.priority, 2) as priority,
           coalesce(i.max_attempts, 25) as max_attempts, i.tags, i.metadata, i.trace_context, i.limit_key,
           (i.o - 1)::integer as ord, coalesce(i.run_at, now()) as due,
           coalesce(i.unique_key, case when i."unique" is not null
             then opts_unique_key(i.kind, i.args, coalesce(i.queue, 'default'), coalesce(i.run_at, now()),
                                  jsonb_build_object('unique', i."unique")) end) as unique_key
      from rows from (jsonb_to_recordset(p_jobs) as (kind text, queue text, args jsonb, priority smallint,
             run_at timestamptz, max_attempts integer, tags text[], metadata jsonb, unique_key text,
             "unique" jsonb, trace_context text, limit_key text)) with ordinality
             as i(kind, queue, args, priority, run_at, max_attempts, tags, metadata, unique_key, "unique",
                  trace_context, limit_key, o)),
  ins as (
    insert into jobs (kind, queue, args, state, priority, run_at, max_attempts, tags, metadata, unique_key,
                      trace_context, limit_key)
    select i.kind, i.queue, i.args, case when i.due > now() then 'scheduled' else 'available' end::job_state,
           i.priority, i.due, i.max_attempts, coalesce(i.tags, '{}'), coalesce(i.metadata, '{}'), i.unique_key,
           i.trace_context, i.limit_key
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

-- The batch insert as the TypeScript client calls it (the shape of svc_qs.enqueue_batch: one row of arrays).
create or replace function canonical_enqueue_batch(p_jobs json)
returns table (ids bigint[], created_at timestamptz, keys jsonb, dups jsonb)
language sql set search_path from current as $$
  select array_agg(case when r.duplicate then null else r.id end order by r.ord), now(),
         case when bool_or(r.unique_key is not null) then jsonb_agg(r.unique_key order by r.ord) end,
         jsonb_agg(jsonb_build_object('ord', r.ord, 'existing', r.existing) order by r.ord) filter (where r.duplicate)
    from canonical_enqueue_jobs(p_jobs::jsonb) r
$$;

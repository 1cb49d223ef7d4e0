-- The stable SQL API (docs/reference/storage.md): the functions any driver or language calls; each routes
-- to the engine the storage state names.

-- The SQL producer API: enqueue inside the caller's own transaction. opts: queue, priority, run_at,
-- max_attempts, tags, metadata, unique_key (a key of your own) or unique ({by_args, by_queue,
-- period_ms}), on_conflict ('return' or 'error'), traceparent, limit_key (the key per-key limits count by;
-- carried, not enforced yet). Returns the job's columns and `duplicate`.
create or replace function enqueue(p_kind text, p_args jsonb default '{}', p_opts jsonb default '{}')
returns table (id bigint, kind text, queue text, args jsonb, state job_state, priority smallint, attempt integer,
               max_attempts integer, run_at timestamptz, created_at timestamptz, attempted_at timestamptz,
               finalized_at timestamptz, heartbeat_at timestamptz, deadline_at timestamptz, errors jsonb,
               tags text[], metadata jsonb, result jsonb, unique_key text, callback_id uuid,
               callback_timeout_at timestamptz, lease integer, attempted_by text, trace_context text,
               effective_max_attempts integer, claimed_at timestamptz, limit_key text, duplicate boolean)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  v_job jsonb;
  v_dup boolean;
begin
  if write_route() = 'queue_storage' then
    select e.job, e.duplicate into v_job, v_dup from svc_qs.enqueue_one(p_kind, p_args, p_opts) e;
  else
    select e.job, e.duplicate into v_job, v_dup from canonical_enqueue(p_kind, p_args, p_opts) e;
  end if;
  if v_dup and coalesce(p_opts ->> 'on_conflict', 'return') = 'error' then
    perform raise_api('unique_conflict', format('a job with unique key %s already exists (job %s) and is not finished',
                                                v_job ->> 'unique_key', v_job ->> 'id'));
  end if;
  return query
    select r.id, r.kind, r.queue, r.args, r.state, r.priority, r.attempt, r.max_attempts, r.run_at, r.created_at,
           r.attempted_at, r.finalized_at, r.heartbeat_at, r.deadline_at, r.errors, r.tags, r.metadata, r.result,
           r.unique_key, r.callback_id, r.callback_timeout_at, r.lease, r.attempted_by, r.trace_context,
           r.effective_max_attempts, r.claimed_at, r.limit_key, v_dup
      from jsonb_populate_record(null::jobs, v_job) r;
end $$;

-- The batch insert of the TypeScript client, routed by the storage state in the caller's statement (see
-- write_route), so a producer never writes to the engine a state change has just left: json in, one row of
-- arrays out (see svc_qs.enqueue_batch).
create or replace function enqueue_batch(p_jobs json)
returns table (ids bigint[], created_at timestamptz, keys jsonb, dups jsonb)
language plpgsql set search_path from current set jit = off as $$
begin
  if write_route() = 'queue_storage' then
    return query select * from svc_qs.enqueue_batch(p_jobs);
  else
    return query select * from canonical_enqueue_batch(p_jobs);
  end if;
end $$;

create or replace function get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current set jit = off as $$
begin
  return coalesce(case when read_queue_storage() then svc_qs.get_job(p_id) end,
                  case when read_canonical() then canonical_get_job(p_id) end);
end $$;

-- {jobs, next_cursor}; filters {state, kind, queue, tag, q, limit, cursor}.
create or replace function list_jobs(p_filter jsonb default '{}') returns jsonb
language plpgsql stable set search_path from current set jit = off as $$
declare
  v_q jsonb;
  v_c jsonb;
  v_limit integer := page_limit(p_filter);
  v_rows jsonb[];
begin
  if not read_queue_storage() then
    return canonical_list_jobs(p_filter);
  end if;
  v_q := svc_qs.list_jobs(p_filter);
  if not read_canonical() then
    return v_q;
  end if;
  v_c := canonical_list_jobs(p_filter);
  -- both engines: merge the two pages, newest first (each already holds the newest limit of its engine)
  select array_agg(j order by (j ->> 'id')::bigint desc) into v_rows
    from (select j from jsonb_array_elements(v_q -> 'jobs') j
          union all select j from jsonb_array_elements(v_c -> 'jobs') j) x;
  v_rows := coalesce(v_rows, '{}');
  return jsonb_build_object(
    'jobs', coalesce(to_jsonb(v_rows[1:v_limit]), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit
                          or v_q ->> 'next_cursor' is not null or v_c ->> 'next_cursor' is not null
                        then encode_job_cursor((v_rows[least(v_limit, cardinality(v_rows))] ->> 'id')::bigint) end);
end $$;

create or replace function cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
begin
  if read_canonical() and exists (select 1 from jobs where id = p_id) then
    return canonical_cancel_job(p_id);
  end if;
  if read_queue_storage() then
    return svc_qs.cancel_job(p_id);
  end if;
  perform raise_api('job_not_found', format('job %s not found', p_id));
end $$;

create or replace function retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
declare
  v jobs;
begin
  if read_queue_storage() and svc_qs.get_job(p_id) is not null then
    return svc_qs.retry_job(p_id);
  end if;
  select * into v from jobs where id = p_id;
  if v.id is not null then
    if v.state not in ('completed', 'failed', 'cancelled') then
      perform raise_api('invalid_state', format('job %s is %s: only a completed, failed or cancelled job can be retried',
                                                p_id, v.state));
    end if;
    -- From mixed_transition on, new work runs on queue storage: a retained canonical job is retried there.
    if read_queue_storage() then
      perform svc_qs.adopt(array[p_id], true);
      return svc_qs.get_job(p_id);
    end if;
    return canonical_retry_job(p_id);
  end if;
  perform raise_api('job_not_found', format('job %s not found', p_id));
end $$;

-- Resolves a callback wherever it lives: 'complete', 'fail', 'heartbeat' (HTTP) or 'resume' (in-process).
create or replace function resolve_callback(
  p_id uuid, p_action text, p_payload jsonb default null, p_error text default null, p_retryable boolean default null,
  p_timeout_seconds integer default null
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
begin
  if exists (select 1 from callbacks c where c.id = p_id) then
    return query select * from canonical_resolve_callback(p_id, p_action, p_payload, p_error, p_retryable, p_timeout_seconds);
  else
    return query select * from svc_qs.resolve_callback(p_id, p_action, p_payload, p_error, p_retryable, p_timeout_seconds);
  end if;
end $$;

create or replace function resolve_callbacks(p_items json)
returns table (ord integer, outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  r record;
begin
  for r in
    select i.*
      from json_to_recordset(p_items) as i(ord integer, id uuid, action text, payload text, error text,
                                           retryable boolean, timeout_seconds integer)
     -- one index probe per item (a join would hash the whole callbacks table)
     order by (select c.job_id from callbacks c where c.id = i.id) nulls last, i.ord
  loop
    return query select r.ord, x.outcome, x.job_id, x.state, x.timeout_at
      from canonical_resolve_callback(r.id, r.action, r.payload::jsonb, r.error, r.retryable, r.timeout_seconds) x;
  end loop;
end $$;

-- Counts a refused callback request (bad signature, bad body, too large) on the pending callback it
-- names, wherever it lives: the count and the last refusal {status, code, at}, in place (one row, no
-- growth). Whether a pending callback was found.
create or replace function record_callback_rejection(p_id uuid, p_status integer, p_code text) returns boolean
language plpgsql set search_path from current set jit = off as $$
declare
  v_last jsonb := jsonb_build_object('status', p_status, 'code', p_code, 'at', iso(now()));
begin
  update callbacks set rejected_count = rejected_count + 1, last_rejection = v_last
   where id = p_id and state = 'pending';
  if found then
    return true;
  end if;
  update svc_qs.callbacks set rejected_count = rejected_count + 1, last_rejection = v_last
   where id = p_id and state = 'pending';
  return found;
end $$;

-- The cluster's health as `svc health --json` reports it: runtimes heartbeated within p_live_ms are
-- live; a live runtime whose last report was not ready is unhealthy.
create or replace function health(p_expected_version integer, p_live_ms bigint default 90000) returns jsonb
language sql stable set search_path from current as $$
  with v as (select max(version) as version from schema_migrations),
       s as (select engine, transition from storage_state),
       r as (select count(*) as live, count(*) filter (where not ready) as unhealthy from runtimes
              where heartbeat_at > now() - p_live_ms * interval '1 millisecond')
  select jsonb_strip_nulls(jsonb_build_object(
    'ready', v.version >= p_expected_version,
    'postgres', 'connected',
    'schema_version', v.version,
    'expected_schema_version', p_expected_version,
    'storage', case when s.transition in ('mixed_transition', 'active') then 'queue_storage' else 'canonical' end,
    'storage_transition', s.transition,
    'live_runtimes', r.live,
    'unhealthy_runtimes', r.unhealthy,
    'reason', case when v.version < p_expected_version
                   then format('schema version %s is older than %s: run `svc migrate`', v.version, p_expected_version) end))
  from v, s, r
$$;

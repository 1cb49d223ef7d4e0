-- svc schema version 4: the queue_storage engine, the stable SQL API of both engines, the retry policy
-- stored with each attempt, trace context, leader terms and the storage-transition columns.
--
-- Runs with search_path set to the target schema (default `svc`). Template parameters (replaced by
-- `svc migrate` before the file runs, see docs/reference/storage.md):
--   {{qs}}           the queue-storage schema as a quoted identifier (default "<schema>_qs")
--   {{qs_name}}      the same name as a string literal
--   {{slots}}        ring slots (partitions of the ring tables)
--   {{rotation_ms}}  how often the leader rotates the ring
--   {{shards}}       producer shards per lane
-- Both engines' objects are installed whatever engine the database runs (expand first); the storage
-- state decides which one takes writes.

------------------------------------------------------------------------------------------------------
-- A. Base schema: state, policy columns, leadership, helpers.
------------------------------------------------------------------------------------------------------

alter table storage_state
  add column prepared_engine text,
  add column qs_schema text,
  add column qs_slots integer,
  add column qs_rotation_ms integer,
  add column qs_shards integer,
  add column epoch integer not null default 0,
  add constraint storage_state_engine_check check (engine in ('canonical', 'queue_storage')),
  add constraint storage_state_transition_check
    check (transition in ('canonical', 'prepared', 'mixed_transition', 'active'));
update storage_state
   set qs_schema = {{qs_name}}, qs_slots = {{slots}}, qs_rotation_ms = {{rotation_ms}}, qs_shards = {{shards}};

-- The retry policy that applied to the attempt (the smaller of the job's and the kind's max attempts, and
-- the delay its retry gets), stored at claim so that every path that fails the attempt uses the same
-- schedule, in whatever process it runs. Null for attempts claimed before version 4.
alter table jobs
  add column trace_context text,
  add column effective_max_attempts integer,
  add column retry_delay_ms bigint;

-- Engines a runtime can execute (rows of older processes count as canonical-only), and when the leader
-- last rescued the attempts of a runtime that stopped heartbeating.
alter table runtimes
  add column engines text[] not null default '{canonical}',
  add column swept_at timestamptz;

-- Rejected requests that named a pending callback (bad signature, wrong body, ...): a count and the last one.
alter table callbacks
  add column rejected_count integer not null default 0,
  add column last_rejection jsonb;

-- The leader's term: renewed by the holder every tick; a challenger may take over a term that was not
-- renewed within the leader TTL, and every maintenance step checks the term it runs under.
create table leadership (
  singleton  boolean primary key default true check (singleton),
  holder     text,
  term       bigint not null default 0,
  renewed_at timestamptz
);
insert into leadership default values;

-- RFC 3339 in UTC with milliseconds, exactly as JavaScript's Date.prototype.toISOString writes it.
create function iso(t timestamptz) returns text language sql stable set search_path from current as $$
  select to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A job as every JSON surface shows it (snake_case), from the jsonb of a row with the job columns.
create function job_json(r jsonb) returns jsonb language sql stable set search_path from current as $$
  select jsonb_build_object(
    'id', r -> 'id', 'kind', r -> 'kind', 'queue', r -> 'queue', 'args', r -> 'args', 'state', r -> 'state',
    'priority', r -> 'priority', 'attempt', r -> 'attempt', 'max_attempts', r -> 'max_attempts',
    'effective_max_attempts', r -> 'effective_max_attempts',
    'run_at', iso((r ->> 'run_at')::timestamptz), 'created_at', iso((r ->> 'created_at')::timestamptz),
    'attempted_at', iso((r ->> 'attempted_at')::timestamptz),
    'finalized_at', iso((r ->> 'finalized_at')::timestamptz),
    'heartbeat_at', iso((r ->> 'heartbeat_at')::timestamptz),
    'deadline_at', iso((r ->> 'deadline_at')::timestamptz),
    'errors', r -> 'errors', 'tags', r -> 'tags', 'metadata', r -> 'metadata', 'result', r -> 'result',
    'unique_key', r -> 'unique_key', 'callback_id', r -> 'callback_id',
    'callback_timeout_at', iso((r ->> 'callback_timeout_at')::timestamptz),
    'attempted_by', r -> 'attempted_by', 'lease', r -> 'lease')
$$;

-- Raises one of the stable errors of the SQL API: SQLSTATE P0001, the code in HINT.
create function raise_api(p_code text, p_message text) returns void language plpgsql set search_path from current as $$
begin
  raise exception using errcode = 'P0001', message = p_message, hint = p_code;
end $$;

-- The one definition of a unique key: the kind, plus the queue, the args and the time bucket of run_at
-- when given (null leaves a part out). args enter as jsonb text, so key order and spacing do not matter.
create function unique_key(p_kind text, p_args jsonb, p_queue text, p_period_ms bigint,
                           p_run_at timestamptz default now())
returns text language sql immutable set search_path from current as $$
  select encode(sha256(convert_to(
    'kind=' || p_kind
      || coalesce(E'\nqueue=' || p_queue, '')
      || coalesce(E'\nargs=' || p_args::text, '')
      || coalesce(E'\nperiod=' || floor(extract(epoch from p_run_at) * 1000 / p_period_ms)::bigint::text, ''),
    'UTF8')), 'hex')
$$;

-- The key of an enqueue's opts: an explicit `unique_key`, or `unique` ({by_args, by_queue, period_ms}).
create function opts_unique_key(p_kind text, p_args jsonb, p_queue text, p_run_at timestamptz, p_opts jsonb)
returns text language plpgsql immutable set search_path from current as $$
declare
  u jsonb := p_opts -> 'unique';
begin
  if p_opts ? 'unique_key' and jsonb_typeof(p_opts -> 'unique_key') = 'string' then
    return p_opts ->> 'unique_key';
  end if;
  if u is null or jsonb_typeof(u) <> 'object' then
    return null;
  end if;
  return unique_key(
    p_kind,
    case when coalesce((u ->> 'by_args')::boolean, true) then p_args end,
    case when coalesce((u ->> 'by_queue')::boolean, false) then p_queue end,
    (u ->> 'period_ms')::bigint,
    p_run_at);
end $$;

-- Milliseconds of the default retry backoff (2^attempt s plus up to 25 % jitter, capped at 24 h).
create function backoff_ms(attempt integer) returns bigint language sql volatile as $$
  select round(least(power(2, least(attempt, 30))::float8, 86400) * (1 + random() * 0.25) * 1000)::bigint
$$;

-- Validates the options of enqueue (the SQL producer API) and fills the defaults; raises 22023 naming
-- the problem. Returns {queue, priority, max_attempts, run_at, tags, metadata, unique_key, trace_context}.
create function enqueue_input(p_kind text, p_args jsonb, p_opts jsonb) returns jsonb
language plpgsql stable set search_path from current as $$
declare
  v_opts jsonb := coalesce(p_opts, '{}');
  v_queue text := coalesce(v_opts ->> 'queue', 'default');
  v_priority integer;
  v_max integer;
  v_run_at timestamptz;
  v_tags jsonb := coalesce(v_opts -> 'tags', '[]');
  v_meta jsonb := coalesce(v_opts -> 'metadata', '{}');
begin
  if p_kind is null or length(p_kind) not between 1 and 255 then
    raise exception 'svc.enqueue: kind must be a string of 1 to 255 characters' using errcode = '22023';
  end if;
  if p_args is null or jsonb_typeof(p_args) <> 'object' then
    raise exception 'svc.enqueue: args must be a JSON object' using errcode = '22023';
  end if;
  if jsonb_typeof(v_opts) <> 'object' then
    raise exception 'svc.enqueue: opts must be a JSON object' using errcode = '22023';
  end if;
  if v_queue !~ '^[A-Za-z0-9_.-]{1,48}$' then
    raise exception 'svc.enqueue: queue name must be 1 to 48 characters of A-Z a-z 0-9 _ . -' using errcode = '22023';
  end if;
  begin
    v_priority := coalesce((v_opts ->> 'priority')::integer, 2);
    v_max := coalesce((v_opts ->> 'max_attempts')::integer, 25);
  exception when others then
    raise exception 'svc.enqueue: priority and max_attempts must be integers' using errcode = '22023';
  end;
  if v_priority not between 1 and 4 then
    raise exception 'svc.enqueue: priority must be 1 (highest) to 4' using errcode = '22023';
  end if;
  if v_max not between 1 and 1000 then
    raise exception 'svc.enqueue: max_attempts must be 1 to 1000' using errcode = '22023';
  end if;
  begin
    v_run_at := coalesce((v_opts ->> 'run_at')::timestamptz, now());
  exception when others then
    raise exception 'svc.enqueue: run_at must be an RFC 3339 time' using errcode = '22023';
  end;
  if jsonb_typeof(v_tags) <> 'array' or exists (select 1 from jsonb_array_elements(v_tags) t where jsonb_typeof(t) <> 'string') then
    raise exception 'svc.enqueue: tags must be an array of strings' using errcode = '22023';
  end if;
  if jsonb_typeof(v_meta) <> 'object' then
    raise exception 'svc.enqueue: metadata must be a JSON object' using errcode = '22023';
  end if;
  if v_opts ? 'on_conflict' and coalesce(v_opts ->> 'on_conflict', '') not in ('return', 'error') then
    raise exception 'svc.enqueue: on_conflict must be "return" or "error"' using errcode = '22023';
  end if;
  return jsonb_build_object(
    'queue', v_queue, 'priority', v_priority, 'max_attempts', v_max, 'run_at', v_run_at, 'tags', v_tags,
    'metadata', v_meta, 'unique_key', opts_unique_key(p_kind, p_args, v_queue, v_run_at, v_opts),
    'trace_context', v_opts ->> 'traceparent');
end $$;

-- Live unique jobs get their key in the definition above. Before version 4 the client computed keys
-- itself (SHA-256 of the same parts, with the args as JSON with sorted keys and no spaces); the parts a
-- key was built from are found by trying each choice of args and queue against the stored key. A key
-- that included a time period cannot be recomputed (the period is not stored) and is left as it was.
create function legacy_key_json(j jsonb) returns text language plpgsql immutable as $$
begin
  return case jsonb_typeof(j)
    when 'object' then '{' || coalesce((select string_agg(to_json(e.k)::text || ':' || legacy_key_json(e.v), ','
                                                           order by e.k collate "C")
                                          from jsonb_each(j) e(k, v)), '') || '}'
    when 'array' then '[' || coalesce((select string_agg(legacy_key_json(a.v), ',' order by a.o)
                                         from jsonb_array_elements(j) with ordinality a(v, o)), '') || ']'
    else j::text end;
end $$;

do $$
declare
  r record;
  by_args boolean;
  by_queue boolean;
begin
  for r in select id, kind, queue, args, unique_key from jobs
            where unique_key is not null
              and state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') loop
    <<combos>>
    foreach by_args in array array[true, false] loop
      foreach by_queue in array array[false, true] loop
        if encode(sha256(convert_to('kind=' || r.kind
                                    || case when by_queue then E'\nqueue=' || r.queue else '' end
                                    || case when by_args then E'\nargs=' || legacy_key_json(r.args) else '' end,
                                    'UTF8')), 'hex') = r.unique_key then
          begin
            update jobs set unique_key = unique_key(r.kind, case when by_args then r.args end,
                                                    case when by_queue then r.queue end, null)
             where id = r.id;
          exception when unique_violation then
            null; -- keep the old key
          end;
          exit combos;
        end if;
      end loop;
    end loop;
  end loop;
end $$;

drop function legacy_key_json(jsonb);

------------------------------------------------------------------------------------------------------
-- B. The canonical engine: one failure path, get/list/cancel/retry, and callbacks that use them.
------------------------------------------------------------------------------------------------------

-- Fails the attempt (id, lease) if the job is still in one of `p_from`: `failed` when the error is
-- terminal or the attempt was the last the policy allows, else `retryable` after the delay (`p_delay_ms`
-- when given, e.g. a Retry-After, else the delay stored at claim, else the default backoff). The one
-- path for a handler's error, rescue, a callback timeout and a `fail` callback. Null when the attempt
-- is no longer current.
create function canonical_fail_attempt(p_id bigint, p_lease integer, p_error text, p_terminal boolean,
                                       p_delay_ms bigint default null,
                                       p_from job_state[] default '{running,waiting_external}')
returns jobs language plpgsql set search_path from current as $$
declare
  v jobs;
  v_final boolean;
  v_delay bigint;
begin
  select * into v from jobs where id = p_id and lease = p_lease and state = any(p_from) for update;
  if v.id is null then
    return null;
  end if;
  v_final := p_terminal or v.attempt >= least(v.max_attempts, coalesce(v.effective_max_attempts, v.max_attempts));
  v_delay := greatest(0, coalesce(p_delay_ms, v.retry_delay_ms, backoff_ms(v.attempt)));
  update jobs j
     set state = case when v_final then 'failed' else 'retryable' end::job_state,
         run_at = case when v_final then j.run_at else now() + v_delay * interval '1 millisecond' end,
         finalized_at = case when v_final then now() end,
         heartbeat_at = null, deadline_at = null,
         errors = j.errors || jsonb_build_array(jsonb_build_object(
           'attempt', j.attempt, 'at', iso(now()), 'error', p_error, 'terminal', v_final))
   where j.id = p_id
  returning * into v;
  -- While mixed, a canonical retry moves the job to queue storage (the transition then converges).
  if not v_final and (select transition from storage_state) = 'mixed_transition' then
    perform {{qs}}.adopt(array[p_id]);
  end if;
  return v;
end $$;

-- Gives back a claimed attempt that never started (a prefetched job): `available` again, its attempt
-- not consumed; the lease keeps its new value, so a late writer of that claim changes nothing.
create function canonical_give_back(p_id bigint, p_lease integer) returns boolean
language plpgsql set search_path from current as $$
declare
  v_queue text;
begin
  update jobs set state = 'available', attempt = attempt - 1, attempted_at = null, attempted_by = null,
         heartbeat_at = null, deadline_at = null, run_at = now()
   where id = p_id and lease = p_lease and state = 'running' and attempted_at is null
  returning queue into v_queue;
  if v_queue is null then
    return false;
  end if;
  perform pg_notify(current_schema() || '_jobs', v_queue);
  return true;
end $$;

-- Functions on the hot paths are plpgsql, not sql: a plpgsql statement's plan is kept across calls, a
-- SQL function's query is planned on every call (which cost more than running it, for the views).
create function canonical_get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current as $$
begin
  return (select job_json(to_jsonb(j)) from jobs j where j.id = p_id);
end $$;

-- The keyset cursor of job listings: base64 of "id:<n>" (without padding).
create function encode_job_cursor(p_id bigint) returns text language sql immutable set search_path from current as $$
  select rtrim(encode(convert_to('id:' || p_id, 'UTF8'), 'base64'), '=')
$$;

create function decode_job_cursor(p_cursor text) returns bigint language plpgsql immutable set search_path from current as $$
declare
  v text;
  m text[];
begin
  begin
    v := convert_from(decode(p_cursor || repeat('=', (4 - length(p_cursor) % 4) % 4), 'base64'), 'UTF8');
  exception when others then
    v := null;
  end;
  m := regexp_match(coalesce(v, ''), '^id:([0-9]{1,18})$');
  if m is null then
    perform raise_api('invalid_request',
      'invalid cursor: pass the next_cursor of a previous page, or omit it for the first page');
  end if;
  return m[1]::bigint;
end $$;

-- The WHERE clauses of a job listing filter {state, kind, queue, tag, q} (values as literals, checked),
-- for a relation with the job columns.
create function job_filter_sql(p jsonb) returns text language plpgsql immutable set search_path from current as $$
declare
  w text[] := '{true}';
  v_states text[];
  s text;
begin
  if p ? 'state' and p -> 'state' <> 'null' then
    v_states := case jsonb_typeof(p -> 'state')
      when 'array' then array(select jsonb_array_elements_text(p -> 'state'))
      else array[p ->> 'state'] end;
    foreach s in array v_states loop
      if s is null or s not in ('scheduled', 'available', 'running', 'waiting_external', 'retryable', 'completed', 'failed', 'cancelled') then
        perform raise_api('invalid_request', format('unknown job state %s', coalesce(to_jsonb(s)::text, 'null')));
      end if;
    end loop;
    w := w || format('state::text = any(%L::text[])', v_states);
  end if;
  if coalesce(p ->> 'kind', '') <> '' then w := w || format('kind = %L', p ->> 'kind'); end if;
  if coalesce(p ->> 'queue', '') <> '' then w := w || format('queue = %L', p ->> 'queue'); end if;
  if coalesce(p ->> 'tag', '') <> '' then w := w || format('tags @> array[%L]::text[]', p ->> 'tag'); end if;
  if coalesce(p ->> 'q', '') <> '' then
    w := w || format('args::text ilike %L', '%' || regexp_replace(p ->> 'q', '([\\%_])', '\\\1', 'g') || '%');
  end if;
  if coalesce(p ->> 'cursor', '') <> '' then
    w := w || format('id < %s', decode_job_cursor(p ->> 'cursor'));
  end if;
  return array_to_string(w, ' and ');
end $$;

create function page_limit(p jsonb) returns integer language sql immutable set search_path from current as $$
  select least(greatest(coalesce((p ->> 'limit')::integer, 100), 1), 1000)
$$;

-- {jobs, next_cursor} from the job rows of a page query that fetched limit + 1 rows.
create function job_page(p_rows jsonb[], p_limit integer) returns jsonb language sql stable set search_path from current as $$
  select jsonb_build_object(
    'jobs', coalesce((select jsonb_agg(job_json(r) order by o) from unnest(p_rows[1:p_limit]) with ordinality as x(r, o)), '[]'),
    'next_cursor', case when cardinality(p_rows) > p_limit then encode_job_cursor((p_rows[p_limit] ->> 'id')::bigint) end)
$$;

create function canonical_list_jobs(p jsonb) returns jsonb language plpgsql stable set search_path from current as $$
declare
  v_limit integer := page_limit(p);
  v_rows jsonb[];
begin
  execute format('select coalesce(array_agg(to_jsonb(j) order by j.id desc), ''{}'') from (select * from jobs where %s order by id desc limit %s) j',
                 job_filter_sql(p), v_limit + 1)
    into v_rows;
  return job_page(v_rows, v_limit);
end $$;

create function canonical_cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
declare
  v jobs;
begin
  update jobs set state = 'cancelled', finalized_at = now(), heartbeat_at = null, deadline_at = null
   where id = p_id and state not in ('completed', 'failed', 'cancelled')
  returning * into v;
  if v.id is null then
    select * into v from jobs where id = p_id;
    if v.id is null then
      perform raise_api('job_not_found', format('job %s not found', p_id));
    end if;
    perform raise_api('invalid_state', format('job %s is %s: only a job that has not finished can be cancelled', p_id, v.state));
  end if;
  perform pg_notify(current_schema() || '_cancel', p_id::text);
  return job_json(to_jsonb(v));
end $$;

create function canonical_retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
declare
  v jobs;
begin
  update jobs set state = 'available', attempt = 0, run_at = now(), finalized_at = null,
         callback_id = null, callback_timeout_at = null, effective_max_attempts = null, retry_delay_ms = null
   where id = p_id and state in ('completed', 'failed', 'cancelled')
  returning * into v;
  if v.id is null then
    select * into v from jobs where id = p_id;
    if v.id is null then
      perform raise_api('job_not_found', format('job %s not found', p_id));
    end if;
    perform raise_api('invalid_state', format('job %s is %s: only a completed, failed or cancelled job can be retried', p_id, v.state));
  end if;
  perform pg_notify(current_schema() || '_jobs', v.queue);
  return job_json(to_jsonb(v));
end $$;

-- The canonical insert of the SQL producer API (one job).
create function canonical_enqueue(p_kind text, p_args jsonb, p_opts jsonb)
returns table (job jsonb, duplicate boolean) language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  i jsonb := enqueue_input(p_kind, p_args, p_opts);
  v_row jobs;
  v_key text := i ->> 'unique_key';
begin
  insert into jobs (kind, queue, args, state, priority, max_attempts, run_at, tags, metadata, unique_key, trace_context)
  values (p_kind, i ->> 'queue', p_args,
          case when (i ->> 'run_at')::timestamptz > now() then 'scheduled' else 'available' end::job_state,
          (i ->> 'priority')::smallint, (i ->> 'max_attempts')::integer, (i ->> 'run_at')::timestamptz,
          array(select jsonb_array_elements_text(i -> 'tags')), i -> 'metadata', v_key, i ->> 'trace_context')
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

-- Callbacks: the fail action goes through the one failure path (the stored retry policy).
alter function resolve_callback(uuid, text, jsonb, text, boolean, integer) rename to canonical_resolve_callback;

create or replace function canonical_resolve_callback(
  p_id uuid, p_action text, p_payload jsonb, p_error text, p_retryable boolean, p_timeout_seconds integer
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_job_id bigint;
  v_cb callbacks;
  v_job jobs;
  v_state job_state;
  v_deadline timestamptz;
begin
  select c.job_id into v_job_id from callbacks c where c.id = p_id;
  if v_job_id is null then
    return query select 'not_found'::text, null::bigint, null::job_state, null::timestamptz;
    return;
  end if;
  select * into v_job from jobs j where j.id = v_job_id for update;
  select * into v_cb from callbacks c where c.id = p_id for update;
  if v_cb.state = 'pending' and v_job.lease <> v_cb.lease then
    update callbacks c set state = 'superseded', resolved_at = now() where c.id = p_id;
    v_cb.state := 'superseded';
  end if;
  if v_cb.state <> 'pending' or v_cb.deadline_at <= now()
     or v_job.state not in ('running', 'waiting_external') or v_job.callback_id is distinct from v_cb.id then
    return query select 'not_pending'::text, v_job.id, v_job.state, v_cb.deadline_at;
    return;
  end if;

  if p_action = 'complete' then
    update callbacks c set state = 'completed', resolution = 'completed', payload = p_payload, resolved_at = now()
      where c.id = p_id;
    update jobs j set state = 'completed', result = p_payload, finalized_at = now(), heartbeat_at = null,
      deadline_at = null where j.id = v_job.id;
    v_state := 'completed';
  elsif p_action = 'resume' then
    update callbacks c set state = 'completed', resolution = 'resumed', payload = p_payload, resolved_at = now()
      where c.id = p_id;
    update jobs j set state = 'running', heartbeat_at = now() where j.id = v_job.id;
    v_state := 'running';
  elsif p_action = 'fail' then
    update callbacks c set state = 'failed', error = p_error, resolved_at = now() where c.id = p_id;
    v_job := canonical_fail_attempt(v_job.id, v_job.lease, p_error, not coalesce(p_retryable, false));
    v_state := v_job.state;
  elsif p_action = 'heartbeat' then
    v_deadline := now() + p_timeout_seconds * interval '1 second';
    update callbacks c set deadline_at = v_deadline where c.id = p_id;
    update jobs j set callback_timeout_at = v_deadline where j.id = v_job.id;
    return query select 'ok'::text, v_job.id, v_job.state, v_deadline;
    return;
  else
    raise exception 'resolve_callback: unknown action %', p_action using errcode = '22023';
  end if;
  -- Only an in-process handler waits on a callback; NOTIFY serializes commits, so skip it otherwise.
  if v_cb.kind = 'in_process' then
    perform pg_notify(current_schema() || '_callbacks', p_id::text);
  end if;
  return query select 'ok'::text, v_job.id, v_state, null::timestamptz;
end $$;

create or replace function resolve_callbacks(p_items json)
returns table (ord integer, outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
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

------------------------------------------------------------------------------------------------------
-- C. The queue_storage engine (docs/reference/storage.md explains the design).
--
-- Ring tables (ready, spent, closed, starts) are LIST-partitioned by slot and only ever INSERTed into;
-- a slot whose rows are all finished is reclaimed with TRUNCATE. spent and closed rows go into the
-- slot of the ready row they belong to, so a slot is reclaimed as a whole.
--   ready   a job that became claimable: its body, in a lane (queue, priority, shard) at position seq
--   spent   consumes a ready row exactly once (primary key = the ready row's): a claim, or a
--           tombstone (cancel of an unclaimed job)
--   closed  ends a claimed attempt exactly once (job_id, lease): the first closure wins
--   starts  when a prefetched attempt's handler started
-- Heap tables hold what is rare or long-lived (INSERT then DELETE): deferred (scheduled and retryable
-- jobs), parked (attempts outside the ring: waiting for a callback, or running for long), unique_keys,
-- callbacks. Finished jobs go to history, partitioned by finalization time; expired partitions are
-- truncated and dropped, never deleted row by row.
------------------------------------------------------------------------------------------------------

create schema {{qs}};

-- Positions in lanes; one sequence for all lanes (a lane's rows commit in seq order because producers
-- hold the lane's lock from nextval to commit).
create sequence {{qs}}.ready_seq;

-- Append-only ledger of ring rotations: the current slot is the slot of the newest generation.
create table {{qs}}.ring_rotations (
  generation bigint primary key,
  slot       smallint not null,
  at         timestamptz not null default now()
);
insert into {{qs}}.ring_rotations (generation, slot) values (0, 0);
create index on {{qs}}.ring_rotations (slot, generation);

-- Slots whose completions were copied into history, by the generation in which the slot was current:
-- the prune of that slot then only truncates it.
create table {{qs}}.slot_archives (
  slot       smallint not null,
  generation bigint not null,
  at         timestamptz not null default now(),
  primary key (slot, generation)
);

-- Lanes that have ever had a job (claims look only at these).
create table {{qs}}.lanes (
  queue      text not null,
  priority   smallint not null,
  shard      smallint not null,
  created_at timestamptz not null default now(),
  primary key (queue, priority, shard)
);

create table {{qs}}.ready (
  slot          smallint not null,
  queue         text not null,
  priority      smallint not null,
  shard         smallint not null,
  seq           bigint not null,
  job_id        bigint not null,
  kind          text not null,
  args          jsonb not null,
  -- attempts consumed before this entry (a claim makes attempt + 1)
  attempt       integer not null,
  max_attempts  integer not null,
  -- run lease before this entry (a claim makes lease + 1)
  lease         integer not null,
  -- when the job became due (enqueue, its run_at, or promotion)
  run_at        timestamptz not null,
  created_at    timestamptz not null,
  errors        jsonb not null default '[]',
  tags          text[] not null default '{}',
  metadata      jsonb not null default '{}',
  unique_key    text,
  trace_context text,
  -- the previous attempt's start and runtime, shown while the job waits again
  attempted_at  timestamptz,
  attempted_by  text,
  primary key (queue, priority, shard, seq, slot)
) partition by list (slot);
create index on {{qs}}.ready (job_id);

create table {{qs}}.spent (
  slot                   smallint not null,
  queue                  text not null,
  priority               smallint not null,
  shard                  smallint not null,
  seq                    bigint not null,
  job_id                 bigint not null,
  -- a claim: the attempt's run lease (ready.lease + 1); a tombstone: ready.lease
  lease                  integer not null,
  is_claim               boolean not null,
  worker                 text,
  at                     timestamptz not null default now(),
  deadline_at            timestamptz,
  prefetched             boolean not null default false,
  effective_max_attempts integer,
  retry_delay_ms         bigint,
  primary key (queue, priority, shard, seq, slot)
) partition by list (slot);
create index on {{qs}}.spent (job_id);
create index on {{qs}}.spent (worker, at) where is_claim;
create index on {{qs}}.spent (deadline_at) where deadline_at is not null;

-- Closures: an attempt ends exactly once (the primary key makes the first writer win). A completion by
-- its worker (outcome `done`) keeps its result here and the job's body stays in the ring until the
-- leader archives the slot into history before reclaiming it; `dropped` is a completion with no history
-- (retention of completed jobs 0). Every other outcome wrote its effects when it was inserted.
create table {{qs}}.closed (
  slot    smallint not null,
  job_id  bigint not null,
  lease   integer not null,
  outcome text not null,
  at      timestamptz not null default now(),
  result  jsonb,
  primary key (job_id, lease, slot)
) partition by list (slot);

create table {{qs}}.starts (
  slot   smallint not null,
  job_id bigint not null,
  lease  integer not null,
  at     timestamptz not null default now(),
  primary key (job_id, lease, slot)
) partition by list (slot);

do $$
begin
  for i in 0 .. {{slots}} - 1 loop
    execute format('create table {{qs}}.%I partition of {{qs}}.ready for values in (%s)', 'ready_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.spent for values in (%s)', 'spent_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.closed for values in (%s)', 'closed_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.starts for values in (%s)', 'starts_' || i, i);
  end loop;
end $$;

create table {{qs}}.deferred (
  job_id                 bigint primary key,
  state                  text not null check (state in ('scheduled', 'retryable')),
  run_at                 timestamptz not null,
  queue                  text not null,
  priority               smallint not null,
  kind                   text not null,
  args                   jsonb not null,
  -- attempts consumed so far
  attempt                integer not null,
  max_attempts           integer not null,
  lease                  integer not null,
  created_at             timestamptz not null,
  errors                 jsonb not null default '[]',
  tags                   text[] not null default '{}',
  metadata               jsonb not null default '{}',
  unique_key             text,
  trace_context          text,
  attempted_at           timestamptz,
  attempted_by           text,
  effective_max_attempts integer
);
create index on {{qs}}.deferred (run_at);

create table {{qs}}.parked (
  job_id                 bigint primary key,
  lease                  integer not null,
  -- waiting_external: parked until its callback; running: a long attempt moved out of the ring
  state                  text not null check (state in ('running', 'waiting_external')),
  queue                  text not null,
  priority               smallint not null,
  kind                   text not null,
  args                   jsonb not null,
  -- the attempt's number
  attempt                integer not null,
  max_attempts           integer not null,
  run_at                 timestamptz not null,
  created_at             timestamptz not null,
  errors                 jsonb not null default '[]',
  tags                   text[] not null default '{}',
  metadata               jsonb not null default '{}',
  unique_key             text,
  trace_context          text,
  attempted_at           timestamptz,
  attempted_by           text,
  deadline_at            timestamptz,
  prefetched             boolean not null default false,
  effective_max_attempts integer,
  retry_delay_ms         bigint,
  parked_at              timestamptz not null default now()
);
create index on {{qs}}.parked (attempted_by);

create table {{qs}}.unique_keys (
  unique_key text primary key,
  job_id     bigint not null
);

create table {{qs}}.callbacks (
  id             uuid primary key,
  job_id         bigint not null,
  attempt        integer not null,
  lease          integer not null,
  kind           text not null default 'in_process' check (kind in ('in_process', 'http')),
  state          text not null default 'pending'
                 check (state in ('pending', 'completed', 'failed', 'expired', 'superseded')),
  resolution     text,
  payload        jsonb,
  error          text,
  deadline_at    timestamptz not null,
  created_at     timestamptz not null default now(),
  resolved_at    timestamptz,
  rejected_count integer not null default 0,
  last_rejection jsonb
);
create index on {{qs}}.callbacks (job_id);
create index on {{qs}}.callbacks (deadline_at) where state = 'pending';

-- Finished jobs, by retention class (completed; failed and cancelled), in time ranges that the leader
-- creates ahead and drops once past retention. A default partition catches rows no range covers.
create table {{qs}}.history (
  class                  text not null check (class in ('completed', 'failed')),
  finalized_at           timestamptz not null,
  job_id                 bigint not null,
  lease                  integer not null,
  state                  text not null check (state in ('completed', 'failed', 'cancelled')),
  queue                  text not null,
  priority               smallint not null,
  kind                   text not null,
  args                   jsonb not null,
  attempt                integer not null,
  max_attempts           integer not null,
  effective_max_attempts integer,
  run_at                 timestamptz not null,
  created_at             timestamptz not null,
  attempted_at           timestamptz,
  attempted_by           text,
  errors                 jsonb not null default '[]',
  tags                   text[] not null default '{}',
  metadata               jsonb not null default '{}',
  result                 jsonb,
  unique_key             text,
  trace_context          text
) partition by list (class);
create table {{qs}}.history_completed partition of {{qs}}.history for values in ('completed')
  partition by range (finalized_at);
create table {{qs}}.history_failed partition of {{qs}}.history for values in ('failed')
  partition by range (finalized_at);
create table {{qs}}.history_completed_default partition of {{qs}}.history_completed default;
create table {{qs}}.history_failed_default partition of {{qs}}.history_failed default;
create index on {{qs}}.history (job_id);
create index on {{qs}}.history (finalized_at);
create index on {{qs}}.history (queue, state, finalized_at);

comment on table {{qs}}.ready is 'svc:job-data';
comment on table {{qs}}.spent is 'svc:job-data';
comment on table {{qs}}.closed is 'svc:job-data';
comment on table {{qs}}.starts is 'svc:job-data';
comment on table {{qs}}.deferred is 'svc:job-data';
comment on table {{qs}}.parked is 'svc:job-data';
comment on table {{qs}}.unique_keys is 'svc:job-data';
comment on table {{qs}}.callbacks is 'svc:job-data';
comment on table {{qs}}.history is 'svc:job-data';

------------------------------------------------------------------------------------------------------
-- Views: each job is in exactly one of these at a time (a retained history row counts only while no
-- later life of the job exists). Columns as canonical's jobs table.
------------------------------------------------------------------------------------------------------

create view {{qs}}.jobs_available as
select r.job_id as id, r.kind, r.queue, r.args, 'available'::job_state as state, r.priority, r.attempt,
       r.max_attempts, r.run_at, r.created_at, r.attempted_at, null::timestamptz as finalized_at,
       null::timestamptz as heartbeat_at, null::timestamptz as deadline_at, r.errors, r.tags, r.metadata,
       null::jsonb as result, r.unique_key, null::uuid as callback_id, null::timestamptz as callback_timeout_at,
       r.lease, r.attempted_by, r.trace_context, null::integer as effective_max_attempts,
       null::bigint as retry_delay_ms
  from {{qs}}.ready r
 where not exists (select 1 from {{qs}}.spent t
                    where t.queue = r.queue and t.priority = r.priority and t.shard = r.shard
                      and t.seq = r.seq and t.slot = r.slot);

create view {{qs}}.jobs_running as
select r.job_id as id, r.kind, r.queue, r.args, 'running'::job_state as state, r.priority, r.attempt + 1 as attempt,
       r.max_attempts, r.run_at, r.created_at,
       coalesce((select s.at from {{qs}}.starts s where s.job_id = t.job_id and s.lease = t.lease and s.slot = t.slot),
                case when not t.prefetched then t.at end) as attempted_at,
       null::timestamptz as finalized_at,
       (select w.heartbeat_at from runtimes w where w.id = t.worker) as heartbeat_at,
       t.deadline_at, r.errors, r.tags, r.metadata, null::jsonb as result, r.unique_key,
       cb.id as callback_id, cb.deadline_at as callback_timeout_at, t.lease, t.worker as attempted_by,
       r.trace_context, t.effective_max_attempts, t.retry_delay_ms
  from {{qs}}.spent t
  join {{qs}}.ready r on r.queue = t.queue and r.priority = t.priority and r.shard = t.shard
                     and r.seq = t.seq and r.slot = t.slot
  left join lateral (select c.id, c.deadline_at from {{qs}}.callbacks c
                      where c.job_id = t.job_id and c.lease = t.lease order by c.created_at desc limit 1) cb on true
 where t.is_claim
   and not exists (select 1 from {{qs}}.closed c where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot);

create view {{qs}}.jobs_parked as
select p.job_id as id, p.kind, p.queue, p.args, p.state::job_state as state, p.priority, p.attempt,
       p.max_attempts, p.run_at, p.created_at, p.attempted_at, null::timestamptz as finalized_at,
       case when p.state = 'running' then (select w.heartbeat_at from runtimes w where w.id = p.attempted_by) end
         as heartbeat_at,
       p.deadline_at, p.errors, p.tags, p.metadata, null::jsonb as result, p.unique_key,
       cb.id as callback_id, cb.deadline_at as callback_timeout_at, p.lease, p.attempted_by, p.trace_context,
       p.effective_max_attempts, p.retry_delay_ms
  from {{qs}}.parked p
  left join lateral (select c.id, c.deadline_at from {{qs}}.callbacks c
                      where c.job_id = p.job_id and c.lease = p.lease order by c.created_at desc limit 1) cb on true;

create view {{qs}}.jobs_deferred as
select d.job_id as id, d.kind, d.queue, d.args, d.state::job_state as state, d.priority, d.attempt, d.max_attempts,
       d.run_at, d.created_at, d.attempted_at, null::timestamptz as finalized_at, null::timestamptz as heartbeat_at,
       null::timestamptz as deadline_at, d.errors, d.tags, d.metadata, null::jsonb as result, d.unique_key,
       null::uuid as callback_id, null::timestamptz as callback_timeout_at, d.lease, d.attempted_by,
       d.trace_context, d.effective_max_attempts, null::bigint as retry_delay_ms
  from {{qs}}.deferred d;

create view {{qs}}.jobs_finished as
select h.job_id as id, h.kind, h.queue, h.args, h.state::job_state as state, h.priority, h.attempt, h.max_attempts,
       h.run_at, h.created_at, h.attempted_at, h.finalized_at, null::timestamptz as heartbeat_at,
       null::timestamptz as deadline_at, h.errors, h.tags, h.metadata, h.result, h.unique_key,
       (select c.id from {{qs}}.callbacks c where c.job_id = h.job_id and c.lease = h.lease
         order by c.created_at desc limit 1) as callback_id,
       null::timestamptz as callback_timeout_at, h.lease, h.attempted_by, h.trace_context,
       h.effective_max_attempts, null::bigint as retry_delay_ms
  from {{qs}}.history h
 where not exists (select 1 from {{qs}}.ready r where r.job_id = h.job_id and r.lease > h.lease)
   and not exists (select 1 from {{qs}}.deferred d where d.job_id = h.job_id)
   and not exists (select 1 from {{qs}}.parked p where p.job_id = h.job_id)
   and not exists (select 1 from {{qs}}.history h2 where h2.job_id = h.job_id and h2.lease > h.lease)
   -- the archived copy of a completion still in the ring: the ring's row stands until the slot is reclaimed
   and not exists (select 1 from {{qs}}.closed c where c.job_id = h.job_id and c.lease = h.lease and c.outcome = 'done')
union all
-- Completions still in the ring.
select c.job_id as id, r.kind, r.queue, r.args, 'completed'::job_state as state, r.priority, r.attempt + 1 as attempt,
       r.max_attempts, r.run_at, r.created_at,
       coalesce((select s.at from {{qs}}.starts s where s.job_id = t.job_id and s.lease = t.lease and s.slot = t.slot),
                case when not t.prefetched then t.at end) as attempted_at,
       c.at as finalized_at, null::timestamptz as heartbeat_at, null::timestamptz as deadline_at, r.errors, r.tags,
       r.metadata, c.result, r.unique_key,
       (select cb.id from {{qs}}.callbacks cb where cb.job_id = c.job_id and cb.lease = c.lease
         order by cb.created_at desc limit 1) as callback_id,
       null::timestamptz as callback_timeout_at, c.lease, t.worker as attempted_by, r.trace_context,
       t.effective_max_attempts, null::bigint as retry_delay_ms
  from {{qs}}.closed c
  join {{qs}}.spent t on t.job_id = c.job_id and t.lease = c.lease and t.slot = c.slot and t.is_claim
  join {{qs}}.ready r on r.queue = t.queue and r.priority = t.priority and r.shard = t.shard and r.seq = t.seq
                     and r.slot = t.slot
 where c.outcome = 'done'
   and not exists (select 1 from {{qs}}.ready r2 where r2.job_id = c.job_id and r2.lease > c.lease)
   and not exists (select 1 from {{qs}}.deferred d where d.job_id = c.job_id)
   and not exists (select 1 from {{qs}}.parked p where p.job_id = c.job_id)
   and not exists (select 1 from {{qs}}.history h2 where h2.job_id = c.job_id and h2.lease > c.lease);

create view {{qs}}.jobs as
  select * from {{qs}}.jobs_available
  union all select * from {{qs}}.jobs_running
  union all select * from {{qs}}.jobs_parked
  union all select * from {{qs}}.jobs_deferred
  union all select * from {{qs}}.jobs_finished;

------------------------------------------------------------------------------------------------------
-- Functions of the queue_storage engine. They run with search_path = the base schema (runtimes,
-- queues, storage_state, helpers) and name their own tables with the queue-storage schema.
------------------------------------------------------------------------------------------------------

create function {{qs}}.current_slot() returns smallint language plpgsql stable set search_path from current as $$
begin
  return (select slot from {{qs}}.ring_rotations order by generation desc limit 1);
end $$;

-- Takes a producer lock on one shard of the lane (queue, priority) until commit and returns the shard:
-- first the transaction's own shard (so a transaction that enqueues twice keeps one), then any free one,
-- else it waits for its own. Rows of a lane shard commit in seq order because of this lock.
create function {{qs}}.lock_lane(p_queue text, p_priority smallint) returns smallint
language plpgsql set search_path from current as $$
declare
  n constant integer := {{shards}};
  v_first integer := (txid_current() % n)::integer;
  s integer;
begin
  for i in 0 .. n - 1 loop
    s := (v_first + i) % n;
    if pg_try_advisory_xact_lock(hashtextextended({{qs_name}} || ':lane:' || p_queue || ':' || p_priority || ':' || s, 0)) then
      insert into {{qs}}.lanes (queue, priority, shard) values (p_queue, p_priority, s) on conflict do nothing;
      return s;
    end if;
  end loop;
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':lane:' || p_queue || ':' || p_priority || ':' || v_first, 0));
  insert into {{qs}}.lanes (queue, priority, shard) values (p_queue, p_priority, v_first) on conflict do nothing;
  return v_first;
end $$;

-- Lane shards for the distinct (queue, priority) of jobs in `p_rows` (a jsonb array with queue and
-- priority), locked in a fixed order: {"queue:priority": shard}.
create function {{qs}}.lock_lanes(p_rows jsonb) returns jsonb
language plpgsql set search_path from current as $$
declare
  r record;
  v jsonb := '{}';
begin
  for r in select distinct x.queue, x.priority
             from jsonb_to_recordset(p_rows) as x(queue text, priority smallint) order by 1, 2 loop
    v := v || jsonb_build_object(r.queue || ':' || r.priority, {{qs}}.lock_lane(r.queue, r.priority));
  end loop;
  return v;
end $$;

-- The serialization of claims on one queue (also taken by the prune's forwarding of unclaimed rows).
create function {{qs}}.claim_lock_key(p_queue text) returns bigint language sql immutable set search_path from current as $$
  select hashtextextended({{qs_name}} || ':claim:' || p_queue, 0)
$$;

-- Inserts validated jobs (a jsonb array of {kind, queue, args, priority, run_at (null: now),
-- max_attempts, tags, metadata, unique_key or unique ({by_args, by_queue, period_ms}: the key is computed
-- by unique_key()), trace_context}); ids are drawn in input order. A job whose
-- unique key is held by an unfinished job is not inserted: it comes back with duplicate = true and the
-- existing job. Wakes the queues that got available jobs at commit.
create function {{qs}}.enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_now timestamptz := now();
  v_slot smallint := {{qs}}.current_slot();
  v_shards jsonb;
  v_out jsonb;
  v_ids regclass := pg_get_serial_sequence(quote_ident(current_schema()) || '.jobs', 'id')::regclass;
  x jsonb;
  r record;
  v_existing jsonb;
  v_canonical boolean := (select transition <> 'active' from storage_state);
begin
  v_shards := {{qs}}.lock_lanes((select coalesce(jsonb_agg(x), '[]') from jsonb_array_elements(p_jobs) x
                                  where coalesce((x ->> 'run_at')::timestamptz, v_now) <= v_now));
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
  select jsonb_agg(jsonb_build_object(
           'ord', i.ord, 'id', i.id, 'state', case when i.due > v_now then 'scheduled' else 'available' end,
           'run_at', i.due, 'created_at', v_now, 'unique_key', i.unique_key,
           'duplicate', i.unique_key is not null and not exists (select 1 from uk where uk.job_id = i.id))
           order by i.ord)
         || jsonb_build_array(jsonb_build_object('woken', (select count(*) from woken), 'deferred', (select count(*) from d)))
    into v_out
    from inp i;
  -- Duplicates: the job that holds the key, read in a new statement (it may have committed meanwhile).
  -- When that job finished in between (its key is free again), the job is enqueued after all.
  for x in select e from jsonb_array_elements(v_out) e where e ? 'ord' order by (e ->> 'ord')::integer loop
    v_existing := null;
    if (x ->> 'duplicate')::boolean then
      v_existing := coalesce(
        {{qs}}.get_job((select k.job_id from {{qs}}.unique_keys k where k.unique_key = x ->> 'unique_key')),
        case when v_canonical then canonical_get_job((
          select j.id from jobs j where j.unique_key = x ->> 'unique_key'
             and j.state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable') limit 1)) end);
      if v_existing is null then
        select * into r from {{qs}}.enqueue_jobs(jsonb_build_array(p_jobs -> ((x ->> 'ord')::integer)));
        return query select (x ->> 'ord')::integer, r.id, r.state, r.run_at, r.created_at, r.unique_key, r.duplicate,
                            r.existing;
        continue;
      end if;
    end if;
    return query select (x ->> 'ord')::integer, (x ->> 'id')::bigint, x ->> 'state', (x ->> 'run_at')::timestamptz,
                        (x ->> 'created_at')::timestamptz, x ->> 'unique_key', (x ->> 'duplicate')::boolean, v_existing;
  end loop;
end $$;

-- Claims up to p_limit jobs of a queue for runtime p_worker, by priority and then lane position; the
-- first p_free go to free slots, the rest are prefetched. p_policies: {kind: {max_attempts, timeout_ms,
-- delays_ms: [delay of attempt 1, 2, ...]}} (absent: the job's max attempts, no deadline, the default
-- backoff); p_callbacks: {kind: callback timeout ms} for HTTP workers, whose callback is registered here.
-- Nothing while the queue is paused.
create function {{qs}}.claim(p_queue text, p_limit integer, p_free integer, p_worker text, p_policies jsonb,
                             p_callbacks jsonb, p_prefetch_ttl_ms bigint)
returns table (slot smallint, queue text, priority smallint, shard smallint, seq bigint, job_id bigint, kind text,
               args jsonb, attempt integer, max_attempts integer, lease integer, run_at timestamptz,
               created_at timestamptz, errors jsonb, tags text[], metadata jsonb, unique_key text,
               trace_context text, claimed_at timestamptz, deadline_at timestamptz, prefetched boolean,
               effective_max_attempts integer, retry_delay_ms bigint, callback_id uuid,
               callback_timeout_at timestamptz)
language plpgsql set search_path from current set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  -- Ring slots holding rows: the statement below reads only their partitions (pruned before it starts;
  -- its fixed cost is mostly starting the scans of every partition otherwise). The padding matches none.
  v_live smallint[] := array(select s::smallint from generate_series(0, {{slots}} - 1) s
                              where (select true from {{qs}}.ready r where r.slot = s::smallint limit 1))
                       || array_fill((-1)::smallint, array[{{slots}}]);
begin
  -- Claims of one queue take turns, and so does every other writer of its spent rows (a cancel's
  -- tombstone, the prune's forwarding): a claim's inserts therefore cannot conflict.
  perform pg_advisory_xact_lock({{qs}}.claim_lock_key(p_queue));
  if exists (select 1 from queues q where q.name = p_queue and q.paused) then
    return;
  end if;
  -- Plan shapes here do not depend on statistics (the ring's tables churn faster than ANALYZE could
  -- follow): every lookup is an index probe, and no two CTEs are joined to each other, which the planner
  -- does with nested loops when it underestimates them, quadratic in the batch (ADR 009).
  -- Per priority, the shards of the lane are read from their cursors in seq order and merged, so that
  -- only the rows claimed are read.
  return query
  with cand as (
    select r.* from (select distinct l.priority from {{qs}}.lanes l where l.queue = p_queue) p
    cross join lateral (
      select r.* from (
        {{#each_shard}}(select r.* from {{qs}}.ready r
          where r.queue = p_queue and r.priority = p.priority and r.shard = {{shard}}
            and r.slot in ({{slot_params v_live}})
            and r.seq > coalesce((select t.seq from {{qs}}.spent t
                                   where t.queue = p_queue and t.priority = p.priority and t.shard = {{shard}}
                                     and t.is_claim and t.slot in ({{slot_params v_live}})
                                   order by t.seq desc limit 1), 0)
            -- a tombstone above the cursor (a cancelled job): a point lookup per row
            and (select true from {{qs}}.spent t
                  where t.queue = r.queue and t.priority = r.priority and t.shard = r.shard
                    and t.seq = r.seq and t.slot = r.slot and t.slot in ({{slot_params v_live}}) limit 1) is null
          order by r.seq limit p_limit){{/each_shard}}
      ) r order by r.seq limit p_limit) r
    order by r.priority, r.seq limit p_limit),
  numbered as materialized (
    select c.*, n.pre, now() as claimed_at,
           now() + ((c.pol ->> 'timeout_ms')::bigint + case when n.pre then p_prefetch_ttl_ms else 0 end)
                   * interval '1 millisecond' as deadline_at,
           least(c.max_attempts, coalesce((c.pol ->> 'max_attempts')::integer, c.max_attempts)) as eff,
           coalesce((c.pol -> 'delays_ms' ->> least(c.attempt,
                       jsonb_array_length(coalesce(c.pol -> 'delays_ms', '[null]')) - 1))::bigint,
                    backoff_ms(c.attempt + 1)) as retry_ms,
           case when p_callbacks ? c.kind then gen_random_uuid() end as cb_id,
           case when p_callbacks ? c.kind
                then now() + (p_callbacks ->> c.kind)::bigint * interval '1 millisecond' end as cb_deadline
      from (select c.*, p_policies -> c.kind as pol, row_number() over (order by c.priority, c.seq) as k
              from cand c) c
      cross join lateral (select c.k > p_free as pre) n),
  ins as (
    insert into {{qs}}.spent (slot, queue, priority, shard, seq, job_id, lease, is_claim, worker, at, deadline_at,
                             prefetched, effective_max_attempts, retry_delay_ms)
    select n.slot, n.queue, n.priority, n.shard, n.seq, n.job_id, n.lease + 1, true, p_worker, n.claimed_at,
           n.deadline_at, n.pre, n.eff, n.retry_ms
      from numbered n),
  cbs as (
    insert into {{qs}}.callbacks (id, job_id, attempt, lease, kind, deadline_at)
    select n.cb_id, n.job_id, n.attempt + 1, n.lease + 1, 'http', n.cb_deadline
      from numbered n where n.cb_id is not null)
  select n.slot, n.queue, n.priority, n.shard, n.seq, n.job_id, n.kind, n.args, n.attempt + 1, n.max_attempts,
         n.lease + 1, n.run_at, n.created_at, n.errors, n.tags, n.metadata, n.unique_key, n.trace_context,
         n.claimed_at, n.deadline_at, n.pre, n.eff, n.retry_ms, n.cb_id, n.cb_deadline
    from numbered n
   order by n.priority, n.seq;
end $$;

-- Records that prefetched attempts started (their handler runs only after this commits).
create function {{qs}}.record_starts(p_items jsonb) returns setof bigint
-- plpgsql, not sql: its statement's plan is kept across calls (a SQL function is planned on every call,
-- which cost more than the insert itself).
language plpgsql set search_path from current as $$
begin
  return query
  insert into {{qs}}.starts (slot, job_id, lease)
  select t.slot, t.job_id, t.lease
    from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint)
    cross join lateral (
      select t.slot, t.job_id, t.lease from {{qs}}.spent t
       where i.slot is not null and t.job_id = i.id and t.lease = i.lease and t.slot = i.slot and t.is_claim
      union all
      select t.slot, t.job_id, t.lease from {{qs}}.spent t
       where i.slot is null and t.job_id = i.id and t.lease = i.lease and t.is_claim
      limit 1) t
   where (select true from {{qs}}.closed c
           where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot limit 1) is null
  on conflict do nothing
  returning job_id;
end $$;

-- Ends attempts exactly once. For each item {ord, id, lease, action[, slot, queue, priority, shard, seq]}
-- it inserts the ring closure when the attempt is an open claim in the ring (the closure's primary key
-- makes the first writer win; a claim that no longer exists, e.g. in a reclaimed slot, takes nothing),
-- else deletes the parked row when the attempt was moved out of the ring. Returns what it took: the
-- item's ord with the job's body and the attempt.
create function {{qs}}.take(p_items jsonb) returns jsonb
language plpgsql set search_path from current as $$
declare
  v_ring jsonb;
  v_parked jsonb;
  -- {"job id:lease": the item's ord}
  v_ord jsonb := (select jsonb_object_agg((x ->> 'id') || ':' || (x ->> 'lease'), x -> 'ord')
                    from jsonb_array_elements(p_items) x);
begin
  with inp as (
    select * from jsonb_to_recordset(p_items) as i(ord integer, id bigint, lease integer, action text,
      slot smallint, queue text, priority smallint, shard smallint, seq bigint)),
  -- The attempts asked for: one index probe per item (see claim on plan shapes).
  att as (
    select i.ord, i.action, t.* from inp i cross join lateral (
      select t.* from {{qs}}.spent t
       where i.slot is not null and t.job_id = i.id and t.lease = i.lease and t.slot = i.slot and t.is_claim
      union all
      select t.* from {{qs}}.spent t
       where i.slot is null and t.job_id = i.id and t.lease = i.lease and t.is_claim
      limit 1) t),
  cl as (
    insert into {{qs}}.closed (slot, job_id, lease, outcome)
    select a.slot, a.job_id, a.lease, a.action from att a
    on conflict do nothing
    returning slot, job_id, lease)
  -- What the closures took, read back by index from cl (never cl joined to att).
  select jsonb_agg(jsonb_build_object(
           'ord', (v_ord ->> (a.job_id || ':' || a.lease))::integer, 'job_id', a.job_id, 'lease', a.lease, 'source', 'ring',
           'queue', r.queue,
           'priority', r.priority, 'kind', r.kind, 'args', r.args, 'attempt', r.attempt + 1,
           'max_attempts', r.max_attempts, 'run_at', r.run_at, 'created_at', r.created_at, 'errors', r.errors,
           'tags', r.tags, 'metadata', r.metadata, 'unique_key', r.unique_key, 'trace_context', r.trace_context,
           'attempted_at', coalesce(st.at, case when not a.prefetched then a.at end),
           'started', st.at is not null or not a.prefetched,
           'attempted_by', a.worker, 'deadline_at', a.deadline_at, 'prefetched', a.prefetched,
           'effective_max_attempts', a.effective_max_attempts, 'retry_delay_ms', a.retry_delay_ms))
    into v_ring
    from cl
    cross join lateral (select t.* from {{qs}}.spent t
                         where t.job_id = cl.job_id and t.lease = cl.lease and t.slot = cl.slot and t.is_claim
                         limit 1) a
    cross join lateral (select r.* from {{qs}}.ready r
                         where r.queue = a.queue and r.priority = a.priority and r.shard = a.shard
                           and r.seq = a.seq and r.slot = a.slot limit 1) r
    left join lateral (select st.at from {{qs}}.starts st
                        where st.job_id = a.job_id and st.lease = a.lease and st.slot = a.slot limit 1) st on true;
  v_ring := coalesce(v_ring, '[]');
  if jsonb_array_length(v_ring) < jsonb_array_length(p_items) then
    -- Attempts moved out of the ring. A new statement: it sees parks committed while the first one waited.
    with got as (select jsonb_object_agg(x ->> 'ord', true) as o from jsonb_array_elements(v_ring) x),
    inp as (
      select i.* from jsonb_to_recordset(p_items) as i(ord integer, id bigint, lease integer), got
       where not coalesce(got.o ? i.ord::text, false)),
    del as (
      delete from {{qs}}.parked p using inp i where p.job_id = i.id and p.lease = i.lease
      returning i.ord, p.*)
    select jsonb_agg(jsonb_build_object(
             'ord', d.ord, 'job_id', d.job_id, 'lease', d.lease, 'source', 'parked', 'queue', d.queue,
             'priority', d.priority, 'kind', d.kind, 'args', d.args, 'attempt', d.attempt,
             'max_attempts', d.max_attempts, 'run_at', d.run_at, 'created_at', d.created_at, 'errors', d.errors,
             'tags', d.tags, 'metadata', d.metadata, 'unique_key', d.unique_key, 'trace_context', d.trace_context,
             'attempted_at', d.attempted_at, 'started', d.attempted_at is not null or not d.prefetched,
             'attempted_by', d.attempted_by, 'deadline_at', d.deadline_at, 'prefetched', d.prefetched,
             'effective_max_attempts', d.effective_max_attempts, 'retry_delay_ms', d.retry_delay_ms))
      into v_parked
      from del d;
  end if;
  return v_ring || coalesce(v_parked, '[]');
end $$;

-- The one path by which an attempt ends: takes the attempts (`take`) and applies each item's action.
--   complete  {result, keep}: completed (a history row unless keep is false)
--   fail      {error, terminal, delay_ms}: failed when terminal or the attempt was the last the stored
--             policy allows, else retryable after delay_ms (given), the stored delay, or the default
--   snooze    {delay_ms}: scheduled again, the attempt given back
--   cancel    : cancelled (the worker is told through the cancel channel)
--   give_back : available again at the end of its lane, the attempt not consumed (a prefetched job)
-- Returns the items applied with the job's new state.
create function {{qs}}.close_attempts(p_items jsonb)
returns table (ord integer, job_id bigint, state text)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_taken jsonb := {{qs}}.take(p_items);
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
      attempted_at timestamptz, attempted_by text, effective_max_attempts integer, retry_delay_ms bigint)),
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
    insert into {{qs}}.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                max_attempts, effective_max_attempts, run_at, created_at, attempted_at,
                                attempted_by, errors, tags, metadata, result, unique_key, trace_context)
    select case when s.new_state = 'completed' then 'completed' else 'failed' end, now(), s.job_id, s.lease,
           s.new_state, s.queue, s.priority, s.kind, s.args, s.attempt, s.max_attempts, s.effective_max_attempts,
           s.run_at, s.created_at, s.attempted_at, s.attempted_by, s.new_errors, s.tags, s.metadata,
           case when s.new_state = 'completed' then s.result end, s.unique_key, s.trace_context
      from s where s.new_state in ('failed', 'cancelled') or (s.new_state = 'completed' and coalesce(s.keep, true))
    returning job_id),
  df as (
    insert into {{qs}}.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                                 created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                                 attempted_by, effective_max_attempts)
    select s.job_id, s.new_state, now() + s.delay * interval '1 millisecond', s.queue, s.priority, s.kind, s.args,
           case when s.action = 'snooze' then s.attempt - 1 else s.attempt end, s.max_attempts, s.lease,
           s.created_at, s.new_errors, s.tags, s.metadata, s.unique_key, s.trace_context, s.attempted_at,
           s.attempted_by, s.effective_max_attempts
      from s where s.new_state in ('retryable', 'scheduled')
    returning job_id),
  uk as (
    delete from {{qs}}.unique_keys k using s
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
    v_shards := {{qs}}.lock_lanes(v_back);
    v_slot := {{qs}}.current_slot();
    insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context)
    select v_slot, b.queue, b.priority, (v_shards ->> (b.queue || ':' || b.priority))::smallint,
           nextval('{{qs}}.ready_seq'), b.job_id, b.kind, b.args, b.attempt - 1, b.max_attempts, b.lease, now(),
           b.created_at, b.errors, b.tags, b.metadata, b.unique_key, b.trace_context
      from jsonb_to_recordset(v_back) as b(job_id bigint, lease integer, queue text, priority smallint, kind text,
             args jsonb, attempt integer, max_attempts integer, created_at timestamptz, errors jsonb, tags text[],
             metadata jsonb, unique_key text, trace_context text);
    perform pg_notify(current_schema() || '_jobs', q) from (select distinct b ->> 'queue' as q from jsonb_array_elements(v_back) b) x;
  end if;
end $$;

-- Completions, the hot path: items {id, lease, result, slot[, unique_key]} (the claim's slot, and the
-- job's unique key when it has one) in one statement. The closure keeps the result and the job stays in
-- the ring until the leader archives its slot into history (archive_slot): per job one closure row and
-- nothing else. p_keep false: no history (retention of completed jobs 0). The rest (no slot, or moved out
-- of the ring) goes through close_attempts. Returns the ids completed.
create function {{qs}}.complete(p_items jsonb, p_keep boolean) returns setof bigint
language plpgsql set search_path from current as $$
declare
  v_done bigint[];
  v_rest jsonb;
  -- {"job id:lease": unique key} of the jobs that hold one
  v_keys jsonb := (select jsonb_object_agg((x ->> 'id') || ':' || (x ->> 'lease'), x -> 'unique_key')
                     from jsonb_array_elements(p_items) x where x ->> 'unique_key' is not null);
begin
  -- Plan shapes as in claim: an index probe per item, no CTE joined to another.
  with cl as (
    insert into {{qs}}.closed (slot, job_id, lease, outcome, result)
    select t.slot, t.job_id, t.lease, case when p_keep then 'done' else 'dropped' end,
           case when p_keep then coalesce(i.result, 'null') end
      from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint, result jsonb)
      cross join lateral (
        select t.slot, t.job_id, t.lease from {{qs}}.spent t
         where t.job_id = i.id and t.lease = i.lease and t.slot = i.slot and t.is_claim limit 1) t
     where i.slot is not null
    on conflict do nothing
    returning job_id, lease),
  uk as (
    delete from {{qs}}.unique_keys k using cl
     where v_keys is not null and v_keys ? (cl.job_id || ':' || cl.lease)
       and k.unique_key = v_keys ->> (cl.job_id || ':' || cl.lease) and k.job_id = cl.job_id
    returning k.job_id)
  select array_agg(cl.job_id) into v_done from cl where (select count(*) from uk) >= 0;
  v_done := coalesce(v_done, '{}');
  return query select unnest(v_done);
  if cardinality(v_done) < jsonb_array_length(p_items) then
    select jsonb_agg(x || jsonb_build_object('ord', o - 1, 'action', 'complete', 'keep', p_keep))
      into v_rest
      from jsonb_array_elements(p_items) with ordinality as e(x, o)
     where not ((x ->> 'id')::bigint = any(v_done));
    return query select c.job_id from {{qs}}.close_attempts(v_rest) c;
  end if;
end $$;

-- Copies the completions kept in ring slot p_slot into history (finalized when their closure was
-- written), once per life of the slot, and records that in slot_archives. Only a slot whose every row
-- is consumed and every claim closed (nothing can add a completion to it any more). Returns how many
-- jobs were archived, or null when the slot is not ready (current, pinned) or was archived already.
-- p_check false: the caller (prune, under the slot's exclusive locks) has checked the slot itself.
create function {{qs}}.archive_slot(p_slot smallint, p_check boolean default true) returns integer
language plpgsql set search_path from current as $$
declare
  v_gen bigint := (select max(generation) from {{qs}}.ring_rotations where slot = p_slot);
  v_pins record;
  v integer;
begin
  if p_slot = {{qs}}.current_slot() then
    return null;
  end if;
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':archive:' || p_slot, 0));
  if exists (select 1 from {{qs}}.slot_archives a where a.slot = p_slot and a.generation = v_gen) then
    return null;
  end if;
  if p_check then
    v_pins := {{qs}}.slot_pins(p_slot);
    if v_pins.open_claims > 0 or v_pins.unclaimed > 0 then
      return null;
    end if;
  end if;
  insert into {{qs}}.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                              max_attempts, effective_max_attempts, run_at, created_at, attempted_at,
                              attempted_by, errors, tags, metadata, result, unique_key, trace_context)
  select 'completed', c.at, c.job_id, c.lease, 'completed', r.queue, r.priority, r.kind, r.args, r.attempt + 1,
         r.max_attempts, t.effective_max_attempts, r.run_at, r.created_at,
         coalesce(st.at, case when not t.prefetched then t.at end), t.worker, r.errors, r.tags, r.metadata,
         c.result, r.unique_key, r.trace_context
    from {{qs}}.closed c
    join {{qs}}.spent t on t.job_id = c.job_id and t.lease = c.lease and t.slot = c.slot and t.is_claim
    join {{qs}}.ready r on r.queue = t.queue and r.priority = t.priority and r.shard = t.shard and r.seq = t.seq
                       and r.slot = t.slot
    left join {{qs}}.starts st on st.job_id = t.job_id and st.lease = t.lease and st.slot = t.slot
   where c.slot = p_slot and t.slot = p_slot and r.slot = p_slot and c.outcome = 'done';
  get diagnostics v = row_count;
  insert into {{qs}}.slot_archives (slot, generation) values (p_slot, v_gen);
  return v;
end $$;

-- Whether the attempt (job, lease) is open: 'ring' (an open claim in the ring), 'running' or
-- 'waiting_external' (parked), or null (ended, or never existed).
create function {{qs}}.attempt_place(p_job bigint, p_lease integer) returns text
language plpgsql stable set search_path from current as $$
begin
  return coalesce(
    (select p.state from {{qs}}.parked p where p.job_id = p_job and p.lease = p_lease),
    (select 'ring' from {{qs}}.spent t
      where t.job_id = p_job and t.lease = p_lease and t.is_claim
        and (select true from {{qs}}.closed c
              where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot limit 1) is null
      limit 1));
end $$;

-- Parks attempts in waiting_external until their callback, unless the callback is no longer pending:
-- an attempt in the ring gets the closure `park` and a parked row; a parked running attempt (resumed
-- in-process waiter) changes state. Items {id, lease, callback_id[, locator]}; returns the ids parked.
-- Committed without waiting for the WAL flush (as on canonical: a park lost in a crash leaves the attempt
-- running in the ring, and its runtime's rescue retries it).
create function {{qs}}.park(p_items jsonb) returns setof bigint
language plpgsql set search_path from current as $$
declare
  v_items jsonb;
  v_done bigint[];
begin
  perform set_config('synchronous_commit', 'off', true);
  select jsonb_agg(x || jsonb_build_object('ord', o - 1, 'action', 'park'))
    into v_items
    from jsonb_array_elements(p_items) with ordinality as e(x, o)
   where exists (select 1 from {{qs}}.callbacks c
                  where c.id = (x ->> 'callback_id')::uuid and c.state = 'pending'
                    and c.job_id = (x ->> 'id')::bigint and c.lease = (x ->> 'lease')::integer);
  if v_items is null then
    return;
  end if;
  with inp as (
    select * from jsonb_to_recordset(v_items) as i(id bigint, lease integer, slot smallint, queue text,
      priority smallint, shard smallint, seq bigint)),
  att as (
    select t.* from inp i cross join lateral (
      select t.* from {{qs}}.spent t
       where i.slot is not null and t.job_id = i.id and t.lease = i.lease and t.slot = i.slot and t.is_claim
      union all
      select t.* from {{qs}}.spent t
       where i.slot is null and t.job_id = i.id and t.lease = i.lease and t.is_claim
      limit 1) t),
  cl as (
    insert into {{qs}}.closed (slot, job_id, lease, outcome)
    select a.slot, a.job_id, a.lease, 'park' from att a
    on conflict do nothing
    returning slot, job_id, lease),
  ins as (
    insert into {{qs}}.parked (job_id, lease, state, queue, priority, kind, args, attempt, max_attempts, run_at,
                               created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                               attempted_by, deadline_at, prefetched, effective_max_attempts, retry_delay_ms)
    select a.job_id, a.lease, 'waiting_external', r.queue, r.priority, r.kind, r.args, r.attempt + 1,
           r.max_attempts, r.run_at, r.created_at, r.errors, r.tags, r.metadata, r.unique_key, r.trace_context,
           coalesce(st.at, case when not a.prefetched then a.at end), a.worker, a.deadline_at, a.prefetched,
           a.effective_max_attempts, a.retry_delay_ms
      from cl
      cross join lateral (select t.* from {{qs}}.spent t
                           where t.job_id = cl.job_id and t.lease = cl.lease and t.slot = cl.slot and t.is_claim
                           limit 1) a
      cross join lateral (select r.* from {{qs}}.ready r
                           where r.queue = a.queue and r.priority = a.priority and r.shard = a.shard
                             and r.seq = a.seq and r.slot = a.slot limit 1) r
      left join lateral (select st.at from {{qs}}.starts st
                          where st.job_id = a.job_id and st.lease = a.lease and st.slot = a.slot limit 1) st on true
    returning job_id)
  select array_agg(job_id) into v_done from ins;
  v_done := coalesce(v_done, '{}');
  return query select unnest(v_done);
  -- Attempts already out of the ring (a resumed in-process waiter waits again): a new statement.
  return query
    update {{qs}}.parked p set state = 'waiting_external'
      from jsonb_to_recordset(v_items) as i(id bigint, lease integer)
     where p.job_id = i.id and p.lease = i.lease and p.state = 'running' and not (i.id = any(v_done))
    returning p.job_id;
end $$;

-- Registers a callback for the open attempt (job, lease); older pending callbacks of the job are
-- superseded. Null when the attempt is no longer open.
create function {{qs}}.register_callback(p_job bigint, p_lease integer, p_timeout_ms bigint, p_kind text)
returns uuid language plpgsql set search_path from current as $$
declare
  v_id uuid := gen_random_uuid();
  v_attempt integer;
begin
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':job:' || p_job, 0));
  if {{qs}}.attempt_place(p_job, p_lease) is null then
    return null;
  end if;
  select j.attempt into v_attempt from {{qs}}.jobs j where j.id = p_job and j.lease = p_lease;
  update {{qs}}.callbacks set state = 'superseded', resolved_at = now() where job_id = p_job and state = 'pending';
  insert into {{qs}}.callbacks (id, job_id, attempt, lease, kind, deadline_at)
  values (v_id, p_job, coalesce(v_attempt, 0), p_lease, p_kind, now() + p_timeout_ms * interval '1 millisecond');
  return v_id;
end $$;

-- Resolves a callback as canonical's resolve_callback does: 'complete', 'resume', 'fail' or 'heartbeat'.
-- The callback row is locked, so of concurrent resolutions exactly one wins; the attempt is ended
-- through close_attempts, so a worker's own outcome and a callback never both apply.
create function {{qs}}.resolve_callback(
  p_id uuid, p_action text, p_payload jsonb, p_error text, p_retryable boolean, p_timeout_seconds integer
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_cb {{qs}}.callbacks;
  v_place text;
  v_state text;
  v_deadline timestamptz;
begin
  select * into v_cb from {{qs}}.callbacks c where c.id = p_id for update;
  if v_cb.id is null then
    return query select 'not_found'::text, null::bigint, null::job_state, null::timestamptz;
    return;
  end if;
  v_place := {{qs}}.attempt_place(v_cb.job_id, v_cb.lease);
  if v_cb.state = 'pending' and v_place is null then
    update {{qs}}.callbacks c set state = 'superseded', resolved_at = now() where c.id = p_id;
    v_cb.state := 'superseded';
  end if;
  if v_cb.state <> 'pending' or v_cb.deadline_at <= now() then
    return query select 'not_pending'::text, v_cb.job_id, (select j.state from {{qs}}.jobs j where j.id = v_cb.job_id),
                        v_cb.deadline_at;
    return;
  end if;
  if p_action in ('complete', 'fail') then
    select c.state into v_state from {{qs}}.close_attempts(jsonb_build_array(jsonb_build_object(
      'ord', 0, 'id', v_cb.job_id, 'lease', v_cb.lease,
      'action', case when p_action = 'complete' then 'complete' else 'fail' end,
      'result', p_payload, 'keep', true, 'error', p_error, 'terminal', not coalesce(p_retryable, false)))) c;
    if v_state is null then
      return query select 'not_pending'::text, v_cb.job_id,
                          (select j.state from {{qs}}.jobs j where j.id = v_cb.job_id), v_cb.deadline_at;
      return;
    end if;
    update {{qs}}.callbacks c
       set state = case when p_action = 'complete' then 'completed' else 'failed' end,
           resolution = case when p_action = 'complete' then 'completed' end,
           payload = case when p_action = 'complete' then p_payload end,
           error = case when p_action = 'fail' then p_error end, resolved_at = now()
     where c.id = p_id;
  elsif p_action = 'resume' then
    update {{qs}}.callbacks c set state = 'completed', resolution = 'resumed', payload = p_payload, resolved_at = now()
     where c.id = p_id;
    update {{qs}}.parked p set state = 'running' where p.job_id = v_cb.job_id and p.lease = v_cb.lease;
    v_state := 'running';
  elsif p_action = 'heartbeat' then
    v_deadline := now() + p_timeout_seconds * interval '1 second';
    update {{qs}}.callbacks c set deadline_at = v_deadline where c.id = p_id;
    return query select 'ok'::text, v_cb.job_id,
                        (case when v_place = 'waiting_external' then 'waiting_external' else 'running' end)::job_state,
                        v_deadline;
    return;
  else
    raise exception 'resolve_callback: unknown action %', p_action using errcode = '22023';
  end if;
  if v_cb.kind = 'in_process' then
    perform pg_notify(current_schema() || '_callbacks', p_id::text);
  end if;
  return query select 'ok'::text, v_cb.job_id, v_state::job_state, null::timestamptz;
end $$;

-- Callbacks in one call and one commit, each exactly as resolve_callback, in job-id order.
create function {{qs}}.resolve_callbacks(p_items json)
returns table (ord integer, outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  r record;
begin
  for r in
    select i.*
      from json_to_recordset(p_items) as i(ord integer, id uuid, action text, payload text, error text,
                                           retryable boolean, timeout_seconds integer)
     order by (select c.job_id from {{qs}}.callbacks c where c.id = i.id) nulls last, i.ord
  loop
    return query select r.ord, x.outcome, x.job_id, x.state, x.timeout_at
      from {{qs}}.resolve_callback(r.id, r.action, r.payload::jsonb, r.error, r.retryable, r.timeout_seconds) x;
  end loop;
end $$;

create function {{qs}}.get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current as $$
begin
  return (select job_json(to_jsonb(j)) from {{qs}}.jobs j where j.id = p_id order by j.lease desc limit 1);
end $$;

-- A page of jobs, newest first: each place of a job (available, running, parked, deferred, finished)
-- is read newest first with the filter and the page size, and the pages are merged.
create function {{qs}}.list_jobs(p jsonb) returns jsonb language plpgsql stable set search_path from current as $$
declare
  v_limit integer := page_limit(p);
  v_where text := job_filter_sql(p);
  v_rows jsonb[];
  v_sql text;
begin
  select string_agg(format('(select * from {{qs}}.%I where %s order by id desc limit %s)', v, v_where, v_limit + 1),
                    ' union all ')
    into v_sql
    from unnest(array['jobs_available', 'jobs_running', 'jobs_parked', 'jobs_deferred', 'jobs_finished']) v;
  execute format('select coalesce(array_agg(to_jsonb(j) order by j.id desc), ''{}'') from (select * from (%s) u order by id desc limit %s) j',
                 v_sql, v_limit + 1)
    into v_rows;
  return job_page(v_rows, v_limit);
end $$;

-- Cancels a job that has not finished, wherever it is; raises job_not_found / invalid_state.
create function {{qs}}.cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
declare
  v_job jsonb;
  v_done boolean := false;
begin
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':job:' || p_id, 0));
  for i in 1 .. 5 loop
    v_job := {{qs}}.get_job(p_id);
    if v_job is null then
      perform raise_api('job_not_found', format('job %s not found', p_id));
    end if;
    if v_job ->> 'state' in ('completed', 'failed', 'cancelled') then
      perform raise_api('invalid_state', format('job %s is %s: only a job that has not finished can be cancelled',
                                                p_id, v_job ->> 'state'));
    end if;
    if v_job ->> 'state' in ('scheduled', 'retryable') then
      with del as (delete from {{qs}}.deferred d where d.job_id = p_id returning d.*),
      h as (
        insert into {{qs}}.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                    max_attempts, effective_max_attempts, run_at, created_at, attempted_at,
                                    attempted_by, errors, tags, metadata, unique_key, trace_context)
        select 'failed', now(), d.job_id, d.lease, 'cancelled', d.queue, d.priority, d.kind, d.args, d.attempt,
               d.max_attempts, d.effective_max_attempts, d.run_at, d.created_at, d.attempted_at, d.attempted_by,
               d.errors, d.tags, d.metadata, d.unique_key, d.trace_context
          from del d returning unique_key, job_id),
      uk as (delete from {{qs}}.unique_keys k using h where k.unique_key = h.unique_key and k.job_id = h.job_id)
      select count(*) > 0 into v_done from h;
    elsif v_job ->> 'state' = 'available' then
      -- Under the queue's claim lock (claims insert their spent rows without conflict handling); the next
      -- statement sees a claim that committed while this one waited, and then inserts nothing.
      perform pg_advisory_xact_lock({{qs}}.claim_lock_key(v_job ->> 'queue'));
      with r as (
        select r.* from {{qs}}.ready r
         where r.job_id = p_id and r.lease = (v_job ->> 'lease')::integer
           and not exists (select 1 from {{qs}}.spent t where t.queue = r.queue and t.priority = r.priority
                             and t.shard = r.shard and t.seq = r.seq and t.slot = r.slot)),
      tomb as (
        insert into {{qs}}.spent (slot, queue, priority, shard, seq, job_id, lease, is_claim)
        select r.slot, r.queue, r.priority, r.shard, r.seq, r.job_id, r.lease, false from r
        on conflict do nothing returning slot, queue, priority, shard, seq),
      h as (
        insert into {{qs}}.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                    max_attempts, run_at, created_at, attempted_at, attempted_by, errors, tags,
                                    metadata, unique_key, trace_context)
        select 'failed', now(), r.job_id, r.lease, 'cancelled', r.queue, r.priority, r.kind, r.args, r.attempt,
               r.max_attempts, r.run_at, r.created_at, r.attempted_at, r.attempted_by, r.errors, r.tags,
               r.metadata, r.unique_key, r.trace_context
          from tomb join r using (slot, queue, priority, shard, seq) returning unique_key, job_id),
      uk as (delete from {{qs}}.unique_keys k using h where k.unique_key = h.unique_key and k.job_id = h.job_id)
      select count(*) > 0 into v_done from h;
    else
      select count(*) > 0 into v_done
        from {{qs}}.close_attempts(jsonb_build_array(jsonb_build_object(
               'ord', 0, 'id', p_id, 'lease', (v_job ->> 'lease')::integer, 'action', 'cancel')));
    end if;
    if v_done then
      return {{qs}}.get_job(p_id);
    end if;
    -- It moved meanwhile (claimed, promoted, finished): look again.
  end loop;
  perform raise_api('invalid_state', format('job %s kept changing state; try again', p_id));
end $$;

-- Retries a finished job now: a new life at the end of its lane, attempt 0, errors kept.
create function {{qs}}.retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
declare
  v_job jsonb;
  v_shard smallint;
begin
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':job:' || p_id, 0));
  v_job := {{qs}}.get_job(p_id);
  if v_job is null then
    perform raise_api('job_not_found', format('job %s not found', p_id));
  end if;
  if v_job ->> 'state' not in ('completed', 'failed', 'cancelled') then
    perform raise_api('invalid_state', format('job %s is %s: only a completed, failed or cancelled job can be retried',
                                              p_id, v_job ->> 'state'));
  end if;
  if v_job ->> 'unique_key' is not null then
    insert into {{qs}}.unique_keys (unique_key, job_id) values (v_job ->> 'unique_key', p_id) on conflict do nothing;
    if not found then
      perform raise_api('unique_conflict', format('job %s cannot be retried: another unfinished job holds its unique key',
                                                  p_id));
    end if;
  end if;
  v_shard := {{qs}}.lock_lane(v_job ->> 'queue', (v_job ->> 'priority')::smallint);
  insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease, run_at,
                            created_at, errors, tags, metadata, unique_key, trace_context, attempted_at, attempted_by)
  select {{qs}}.current_slot(), h.queue, h.priority, v_shard, nextval('{{qs}}.ready_seq'), h.id, h.kind, h.args, 0,
         h.max_attempts, h.lease + 1, now(), h.created_at, h.errors, h.tags, h.metadata, h.unique_key,
         h.trace_context, h.attempted_at, h.attempted_by
    from {{qs}}.jobs_finished h where h.id = p_id order by h.lease desc limit 1;
  perform pg_notify(current_schema() || '_jobs', v_job ->> 'queue');
  return {{qs}}.get_job(p_id);
end $$;

-- Moves due scheduled and retryable jobs to the end of their lanes; wakes their queues. Returns how many.
create function {{qs}}.promote(p_batch integer default 1000) returns integer
language plpgsql set search_path from current as $$
declare
  v_rows jsonb;
  v_shards jsonb;
  v_total integer := 0;
  v_slot smallint;
begin
  loop
    with due as (
      select d.job_id from {{qs}}.deferred d where d.run_at <= now() order by d.run_at limit p_batch
      for update skip locked),
    del as (delete from {{qs}}.deferred d using due where d.job_id = due.job_id returning d.*)
    select jsonb_agg(to_jsonb(del)) into v_rows from del;
    exit when v_rows is null;
    v_shards := {{qs}}.lock_lanes(v_rows);
    v_slot := {{qs}}.current_slot();
    insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                              attempted_by)
    select v_slot, d.queue, d.priority, (v_shards ->> (d.queue || ':' || d.priority))::smallint,
           nextval('{{qs}}.ready_seq'), d.job_id, d.kind, d.args, d.attempt, d.max_attempts, d.lease, d.run_at,
           d.created_at, d.errors, d.tags, d.metadata, d.unique_key, d.trace_context, d.attempted_at, d.attempted_by
      from jsonb_to_recordset(v_rows) as d(job_id bigint, queue text, priority smallint, kind text, args jsonb,
             attempt integer, max_attempts integer, lease integer, run_at timestamptz, created_at timestamptz,
             errors jsonb, tags text[], metadata jsonb, unique_key text, trace_context text, attempted_at timestamptz,
             attempted_by text)
     order by d.run_at, d.job_id;
    perform pg_notify(current_schema() || '_jobs', q)
       from (select distinct x ->> 'queue' as q from jsonb_array_elements(v_rows) x) y;
    v_total := v_total + jsonb_array_length(v_rows);
    exit when jsonb_array_length(v_rows) < p_batch;
  end loop;
  return v_total;
end $$;

-- Rescues attempts whose runtime stopped heartbeating (rescue_after), whose hard deadline passed (plus
-- the grace, the worker enforces it first), and, with p_unknown, those of runtimes with no row at all.
-- A prefetched attempt that never started is given back without consuming its attempt; any other is
-- failed with the stored policy. A dead runtime's claims are looked at from a little before its last
-- sweep on (its earlier ones were closed then), so that its attempts in the ring are read once, not at
-- every tick. p_deadline_since bounds the deadline scan (the caller's last scan).
create function {{qs}}.rescue(p_rescue_after_ms bigint, p_grace_ms bigint, p_deadline_since timestamptz,
                              p_unknown boolean)
returns table (id bigint, kind text, state text, reason text)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_items jsonb := '[]';
  v_dead jsonb;
  v_ids text[];
begin
  select coalesce(jsonb_object_agg(w.id, coalesce(w.swept_at - interval '10 seconds', '-infinity')), '{}')
    into v_dead
    from runtimes w where w.heartbeat_at < now() - p_rescue_after_ms * interval '1 millisecond';
  if p_unknown then
    select v_dead || coalesce(jsonb_object_agg(u.worker, '-infinity'::timestamptz), '{}') into v_dead
      from (
        with recursive workers as (
          (select t.worker from {{qs}}.spent t where t.is_claim and t.worker is not null order by t.worker limit 1)
          union all
          select (select t.worker from {{qs}}.spent t where t.is_claim and t.worker > w.worker
                   order by t.worker limit 1)
            from workers w where w.worker is not null)
        select w.worker from workers w
         where w.worker is not null and not exists (select 1 from runtimes r where r.id = w.worker)) u;
  end if;
  v_ids := array(select jsonb_object_keys(v_dead));
  -- Open attempts of those runtimes, and attempts past their deadline.
  with dead as (select key as worker, value #>> '{}' as since from jsonb_each(v_dead)),
  open_ring as (
    select t.job_id, t.lease, t.slot, t.queue, t.priority, t.shard, t.seq, t.prefetched,
           exists (select 1 from {{qs}}.starts s where s.job_id = t.job_id and s.lease = t.lease and s.slot = t.slot)
             as started,
           t.worker = any(v_ids) as by_dead
      from (select t.* from dead d join {{qs}}.spent t on t.worker = d.worker and t.is_claim
                                                     and t.at >= d.since::timestamptz
            union
            select t.* from {{qs}}.spent t
             where t.deadline_at < now() - p_grace_ms * interval '1 millisecond' and t.deadline_at >= p_deadline_since)
           t
     where not exists (select 1 from {{qs}}.closed c where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot)),
  open_parked as (
    select p.job_id, p.lease, null::smallint as slot, null::text as queue, null::smallint as priority,
           null::smallint as shard, null::bigint as seq, p.prefetched, p.attempted_at is not null as started,
           p.attempted_by = any(v_ids) as by_dead
      from {{qs}}.parked p
     where p.state = 'running'
       and (p.attempted_by = any(v_ids) or p.deadline_at < now() - p_grace_ms * interval '1 millisecond')),
  all_open as (
    select *, case when by_dead then 'heartbeat stale: worker presumed dead' else 'deadline exceeded' end as reason
      from (select * from open_ring union all select * from open_parked) x)
  select coalesce(jsonb_agg(jsonb_build_object(
           'ord', o - 1, 'id', a.job_id, 'lease', a.lease, 'slot', a.slot, 'queue', a.queue, 'priority', a.priority,
           'shard', a.shard, 'seq', a.seq,
           'action', case when a.prefetched and not a.started then 'give_back' else 'fail' end,
           'error', 'rescued: ' || a.reason, 'terminal', false, 'reason', a.reason)), '[]')
    into v_items
    from (select x.*, row_number() over () as o from all_open x limit 1000) a;
  if jsonb_array_length(v_items) < 1000 then
    -- every open attempt of those runtimes is in this batch: next time, only their later claims
    update runtimes w set swept_at = now() where w.id = any(v_ids);
  end if;
  if jsonb_array_length(v_items) = 0 then
    return;
  end if;
  return query
    select c.job_id, x ->> 'kind', c.state, i ->> 'reason'
      from {{qs}}.close_attempts(v_items) c
      join jsonb_array_elements(v_items) i on (i ->> 'ord')::integer = c.ord
      left join lateral (select {{qs}}.get_job(c.job_id) as x) g on true;
end $$;

-- Parked attempts whose callback deadline passed: retryable (or failed when exhausted) with the error
-- `callback timed out`; pending callbacks of attempts that already ended are marked expired.
create function {{qs}}.expire_callbacks(p_batch integer default 1000)
returns table (id bigint, kind text, state text, callback_id uuid)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  cb record;
  v_state text;
  v_place text;
begin
  for cb in
    select c.* from {{qs}}.callbacks c where c.state = 'pending' and c.deadline_at < now()
     order by c.deadline_at limit p_batch for update skip locked
  loop
    v_place := {{qs}}.attempt_place(cb.job_id, cb.lease);
    if v_place = 'ring' or v_place = 'running' then
      continue; -- the handler still runs: only its own outcome or rescue ends it
    end if;
    v_state := null;
    if v_place = 'waiting_external' then
      select c.state into v_state from {{qs}}.close_attempts(jsonb_build_array(jsonb_build_object(
        'ord', 0, 'id', cb.job_id, 'lease', cb.lease, 'action', 'fail', 'error', 'callback timed out',
        'terminal', false))) c;
    end if;
    update {{qs}}.callbacks c set state = 'expired', resolved_at = now() where c.id = cb.id;
    if v_state is not null then
      perform pg_notify(current_schema() || '_callbacks', cb.id::text);
      return query select cb.job_id, (select j.kind from {{qs}}.jobs j where j.id = cb.job_id limit 1), v_state, cb.id;
    end if;
  end loop;
end $$;

-- Whether a ring slot holds no rows at all.
create function {{qs}}.slot_empty(p_slot smallint) returns boolean language sql stable set search_path from current as $$
  select not exists (select 1 from {{qs}}.ready where slot = p_slot)
     and not exists (select 1 from {{qs}}.spent where slot = p_slot)
     and not exists (select 1 from {{qs}}.closed where slot = p_slot)
     and not exists (select 1 from {{qs}}.starts where slot = p_slot)
$$;

-- Starts a new ring generation in the next empty slot once the current one is older than
-- p_interval_ms and holds rows. Returns the new slot, or null (not due, current slot empty, ring full).
-- Two leaders at once: the generation's primary key lets one win.
create function {{qs}}.rotate(p_interval_ms bigint) returns smallint
language plpgsql set search_path from current as $$
declare
  v_gen bigint;
  v_slot smallint;
  v_at timestamptz;
  v_next smallint;
begin
  select generation, slot, at into v_gen, v_slot, v_at from {{qs}}.ring_rotations order by generation desc limit 1;
  if v_at > now() - p_interval_ms * interval '1 millisecond' then
    return null;
  end if;
  if not exists (select 1 from {{qs}}.ready where slot = v_slot) then
    return null; -- nothing to seal; truncating idle slots only costs catalog churn
  end if;
  for k in 1 .. {{slots}} - 1 loop
    v_next := ((v_slot + k) % {{slots}})::smallint;
    if {{qs}}.slot_empty(v_next) then
      insert into {{qs}}.ring_rotations (generation, slot) values (v_gen + 1, v_next) on conflict do nothing;
      return case when found then v_next end;
    end if;
  end loop;
  return null;
end $$;

-- Moves attempts that have run longer than p_after_ms in slot p_slot out of the ring (closure `move`, a
-- parked row in state running), so that a long job does not pin its slot. Returns how many.
create function {{qs}}.move_long_attempts(p_slot smallint, p_after_ms bigint) returns integer
language plpgsql set search_path from current as $$
declare
  v integer;
begin
  with att as (
    select t.* from {{qs}}.spent t
     where t.slot = p_slot and t.is_claim and t.at < now() - p_after_ms * interval '1 millisecond'
       and not exists (select 1 from {{qs}}.closed c where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot)),
  cl as (
    insert into {{qs}}.closed (slot, job_id, lease, outcome)
    select a.slot, a.job_id, a.lease, 'move' from att a
    on conflict do nothing
    returning slot, job_id, lease),
  ins as (
    insert into {{qs}}.parked (job_id, lease, state, queue, priority, kind, args, attempt, max_attempts, run_at,
                               created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                               attempted_by, deadline_at, prefetched, effective_max_attempts, retry_delay_ms)
    select a.job_id, a.lease, 'running', r.queue, r.priority, r.kind, r.args, r.attempt + 1, r.max_attempts, r.run_at,
           r.created_at, r.errors, r.tags, r.metadata, r.unique_key, r.trace_context,
           coalesce(st.at, case when not a.prefetched then a.at end), a.worker, a.deadline_at, a.prefetched,
           a.effective_max_attempts, a.retry_delay_ms
      from cl
      cross join lateral (select t.* from {{qs}}.spent t
                           where t.job_id = cl.job_id and t.lease = cl.lease and t.slot = cl.slot and t.is_claim
                           limit 1) a
      cross join lateral (select r.* from {{qs}}.ready r
                           where r.queue = a.queue and r.priority = a.priority and r.shard = a.shard
                             and r.seq = a.seq and r.slot = a.slot limit 1) r
      left join lateral (select st.at from {{qs}}.starts st
                          where st.job_id = a.job_id and st.lease = a.lease and st.slot = a.slot limit 1) st on true
    returning 1)
  select count(*) into v from ins;
  return v;
end $$;

-- What still pins slot p_slot: open claims and unclaimed rows (0 and 0: it can be reclaimed).
create function {{qs}}.slot_pins(p_slot smallint, out open_claims bigint, out unclaimed bigint)
language sql stable set search_path from current as $$
  select (select count(*) from {{qs}}.spent where slot = p_slot and is_claim)
           - (select count(*) from {{qs}}.closed where slot = p_slot),
         (select count(*) from {{qs}}.ready where slot = p_slot)
           - (select count(*) from {{qs}}.spent where slot = p_slot)
$$;

-- Reclaims ring slot p_slot with TRUNCATE when every row in it is finished: every ready row consumed
-- and every claim closed, checked before and again under ACCESS EXCLUSIVE locks of the slot's
-- partitions (taken NOWAIT, or waiting at most p_lock_wait_ms). With p_forward, unclaimed rows (a paused
-- queue's backlog) are first copied into the current slot at the same lane position, under their
-- queues' claim locks. Returns the outcome: pruned, current, empty, open_attempts, unclaimed, busy.
create function {{qs}}.prune(p_slot smallint, p_lock_wait_ms integer, p_forward boolean) returns text
language plpgsql set search_path from current as $$
declare
  v_pins record;
  v_queue text;
  v_cur smallint := {{qs}}.current_slot();
  v_parts text := format('{{qs}}.%I, {{qs}}.%I, {{qs}}.%I, {{qs}}.%I',
                         'ready_' || p_slot, 'spent_' || p_slot, 'closed_' || p_slot, 'starts_' || p_slot);
begin
  if p_slot = v_cur then
    return 'current';
  end if;
  if {{qs}}.slot_empty(p_slot) then
    return 'empty';
  end if;
  v_pins := {{qs}}.slot_pins(p_slot);
  if v_pins.open_claims > 0 then
    return 'open_attempts';
  end if;
  if v_pins.unclaimed > 0 and not p_forward then
    return 'unclaimed';
  end if;
  -- Claims of the queues with unclaimed rows here wait until this transaction ends (try only: never wait).
  if v_pins.unclaimed > 0 then
    for v_queue in
      select distinct r.queue from {{qs}}.ready r
       where r.slot = p_slot
         and not exists (select 1 from {{qs}}.spent t where t.queue = r.queue and t.priority = r.priority
                           and t.shard = r.shard and t.seq = r.seq and t.slot = r.slot)
       order by 1
    loop
      if not pg_try_advisory_xact_lock({{qs}}.claim_lock_key(v_queue)) then
        return 'busy';
      end if;
    end loop;
  end if;
  begin
    if p_lock_wait_ms > 0 then
      perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
      execute 'lock table ' || v_parts || ' in access exclusive mode';
    else
      execute 'lock table ' || v_parts || ' in access exclusive mode nowait';
    end if;
  exception when lock_not_available then
    return 'busy';
  end;
  perform set_config('lock_timeout', '0', true);
  -- Again under the lock: what committed before the lock is visible to this new statement.
  v_cur := {{qs}}.current_slot();
  if p_slot = v_cur then
    return 'current';
  end if;
  v_pins := {{qs}}.slot_pins(p_slot);
  if v_pins.open_claims > 0 then
    return 'open_attempts';
  end if;
  if v_pins.unclaimed > 0 then
    if not p_forward then
      return 'unclaimed';
    end if;
    insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                              attempted_by)
    select v_cur, r.queue, r.priority, r.shard, r.seq, r.job_id, r.kind, r.args, r.attempt, r.max_attempts, r.lease,
           r.run_at, r.created_at, r.errors, r.tags, r.metadata, r.unique_key, r.trace_context, r.attempted_at,
           r.attempted_by
      from {{qs}}.ready r
     where r.slot = p_slot
       and not exists (select 1 from {{qs}}.spent t where t.queue = r.queue and t.priority = r.priority
                         and t.shard = r.shard and t.seq = r.seq and t.slot = r.slot);
  end if;
  -- Completions kept in the slot go to history first, unless the leader archived them already.
  perform {{qs}}.archive_slot(p_slot, false);
  execute 'truncate ' || v_parts;
  return 'pruned';
end $$;

-- History partitions: ranges of p_width_ms aligned to the epoch, created up to p_ahead widths ahead.
-- A range is attached to its class's table (SHARE UPDATE EXCLUSIVE on the parent, so writers go on);
-- locks are awaited at most p_lock_wait_ms. Returns how many were created.
create function {{qs}}.ensure_history(p_class text, p_width_ms bigint, p_ahead integer, p_lock_wait_ms integer)
returns integer language plpgsql set search_path from current as $$
declare
  v_parent text := 'history_' || p_class;
  v_upper timestamptz;
  v_from timestamptz;
  v_to timestamptz;
  v_name text;
  v_n integer := 0;
begin
  select max((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz)
    into v_upper
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
   where i.inhparent = ('{{qs}}.' || v_parent)::regclass and pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT';
  -- Only windows that have not started: a row of the current window may already be in the default
  -- partition (or on its way there), and a range over it could not be attached.
  v_from := greatest(coalesce(v_upper, '-infinity'),
                     to_timestamp((floor(extract(epoch from now()) * 1000 / p_width_ms) + 1) * p_width_ms / 1000.0));
  perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
  while v_from < now() + p_ahead * p_width_ms * interval '1 millisecond' loop
    v_to := v_from + p_width_ms * interval '1 millisecond';
    v_name := v_parent || '_' || to_char(v_from at time zone 'UTC', 'YYYYMMDD"T"HH24MISS');
    begin
      execute format('create table {{qs}}.%I (like {{qs}}.history including defaults including constraints)', v_name);
      execute format('alter table {{qs}}.%I attach partition {{qs}}.%I for values from (%L) to (%L)',
                     v_parent, v_name, v_from, v_to);
    exception when lock_not_available or check_violation then
      return v_n; -- busy, or rows of that window are in the default partition already: next time
    end;
    v_n := v_n + 1;
    v_from := v_to;
  end loop;
  return v_n;
end $$;

-- Drops history ranges of a class that ended before now - p_retention_ms (truncated first, so the space
-- is free even when the drop must wait for a later try), and deletes expired rows of the default
-- partition (only rows written while no range covered their time). Returns rows removed (estimated
-- for dropped ranges).
create function {{qs}}.expire_history(p_class text, p_retention_ms bigint, p_lock_wait_ms integer)
returns bigint language plpgsql set search_path from current as $$
declare
  r record;
  v_n bigint := 0;
  v_deleted bigint;
  v_cut timestamptz := now() - p_retention_ms * interval '1 millisecond';
begin
  perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
  for r in
    select c.oid::regclass as rel, c.reltuples,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz as upper
      from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = ('{{qs}}.history_' || p_class)::regclass and pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
  loop
    continue when r.upper > v_cut;
    begin
      execute format('truncate %s', r.rel);
      execute format('drop table %s', r.rel);
      v_n := v_n + greatest(r.reltuples, 0)::bigint;
    exception when lock_not_available then
      null; -- busy now; the next run tries again
    end;
  end loop;
  execute format('delete from {{qs}}.%I where finalized_at < %L', 'history_' || p_class || '_default', v_cut);
  get diagnostics v_deleted = row_count;
  return v_n + v_deleted;
exception when lock_not_available then
  return v_n;
end $$;

-- Cancels (unfinished) or retries (finished) every job matching a filter {state, kind, queue}, one job
-- at a time through cancel_job / retry_job (a job that changed meanwhile is skipped); with p_dry_run
-- only counts them. Returns the count.
create function {{qs}}.bulk(p_filter jsonb, p_action text, p_dry_run boolean) returns bigint
language plpgsql set search_path from current as $$
declare
  v_states text := case when p_action = 'cancel'
                        then '(''scheduled'', ''available'', ''running'', ''waiting_external'', ''retryable'')'
                        else '(''completed'', ''failed'', ''cancelled'')' end;
  v_sql text := format('select id from {{qs}}.jobs where %s and state::text in %s',
                       job_filter_sql(p_filter - 'cursor' - 'q' - 'tag'), v_states);
  v_id bigint;
  v_n bigint := 0;
begin
  if p_dry_run then
    execute format('select count(*) from (%s) x', v_sql) into v_n;
    return v_n;
  end if;
  for v_id in execute v_sql loop
    begin
      if p_action = 'cancel' then
        perform {{qs}}.cancel_job(v_id);
      else
        perform {{qs}}.retry_job(v_id);
      end if;
      v_n := v_n + 1;
    exception when sqlstate 'P0001' then
      null; -- it finished (or started again) meanwhile
    end;
  end loop;
  return v_n;
end $$;

-- Dashboard figures. Counts are bounded: a count that reaches p_cap is a lower bound and its state is
-- listed in `approximate`. The age of the oldest available job comes from the next claimable row of
-- each lane. [{name, paused, counts, approximate, oldest_available_age_seconds}]
create function {{qs}}.queue_stats(p_cap integer) returns jsonb
language plpgsql stable set search_path from current as $$
declare
  q record;
  st text;
  n bigint;
  v_counts jsonb;
  v_approx text[];
  v_out jsonb := '[]';
  v_age float8;
  v_from text;
begin
  for q in
    select x.name, coalesce(qu.paused, false) as paused
      from (select l.queue as name from {{qs}}.lanes l union select qq.name from queues qq
            union select distinct d.queue from {{qs}}.deferred d union select distinct p.queue from {{qs}}.parked p) x
      left join queues qu on qu.name = x.name
     order by 1
  loop
    v_counts := '{}';
    v_approx := '{}';
    foreach st in array array['scheduled', 'available', 'running', 'waiting_external', 'retryable', 'completed',
                              'failed', 'cancelled'] loop
      v_from := case st
        when 'available' then '{{qs}}.jobs_available'
        when 'running' then '(select * from {{qs}}.jobs_running union all select * from {{qs}}.jobs_parked) j'
        when 'waiting_external' then '{{qs}}.jobs_parked'
        when 'scheduled' then '{{qs}}.jobs_deferred'
        when 'retryable' then '{{qs}}.jobs_deferred'
        else '{{qs}}.jobs_finished' end;
      execute format('select count(*) from (select 1 from %s where queue = $1 and state::text = $2 limit $3) c', v_from)
        into n using q.name, st, p_cap;
      v_counts := v_counts || jsonb_build_object(st, n);
      if n >= p_cap then
        v_approx := v_approx || st;
      end if;
    end loop;
    select extract(epoch from now() - min(f.run_at))::float8 into v_age
      from {{qs}}.lanes l cross join lateral (
        select r.run_at from {{qs}}.ready r
         where r.queue = l.queue and r.priority = l.priority and r.shard = l.shard
           and r.seq > coalesce((select t.seq from {{qs}}.spent t where t.queue = l.queue and t.priority = l.priority
                                    and t.shard = l.shard and t.is_claim order by t.seq desc limit 1), 0)
           and not exists (select 1 from {{qs}}.spent t where t.queue = r.queue and t.priority = r.priority
                             and t.shard = r.shard and t.seq = r.seq and t.slot = r.slot)
         order by r.seq limit 1) f
     where l.queue = q.name;
    v_out := v_out || jsonb_build_array(jsonb_build_object(
      'name', q.name, 'paused', q.paused, 'counts', v_counts, 'approximate', to_jsonb(v_approx),
      'oldest_available_age_seconds', case when v_age is not null then greatest(v_age, 0) end));
  end loop;
  return v_out;
end $$;

-- Counts per kind and state over a sample of at most p_sample jobs (approximate when it is reached).
create function {{qs}}.kind_counts(p_sample integer) returns jsonb
language sql stable set search_path from current as $$
  with s as (select j.kind, j.state::text as state from {{qs}}.jobs j limit p_sample),
       c as (select kind, state, count(*) as n from s group by 1, 2)
  select jsonb_build_object(
    'approximate', (select count(*) from s) >= p_sample,
    'kinds', coalesce((select jsonb_agg(jsonb_build_object('kind', k.kind, 'counts', k.counts) order by k.kind)
                         from (select kind, jsonb_object_agg(state, n) as counts from c group by kind) k), '[]'))
$$;

-- Completions and failures (for good) per minute over the last p_minutes minutes, oldest first.
create function {{qs}}.throughput(p_minutes integer) returns table (minute timestamptz, completed bigint, failed bigint)
language sql stable set search_path from current as $$
  with bounds as (select date_trunc('minute', now()) - (p_minutes - 1) * interval '1 minute' as since),
       fin as (
         select h.finalized_at as at, h.state from {{qs}}.history h, bounds
          where h.finalized_at >= bounds.since and h.state in ('completed', 'failed')
            -- an archived completion still in the ring counts once, below
            and not exists (select 1 from {{qs}}.closed c
                              where c.job_id = h.job_id and c.lease = h.lease and c.outcome = 'done')
         union all
         select c.at, 'completed' from {{qs}}.closed c, bounds where c.outcome = 'done' and c.at >= bounds.since),
       done as (
         select date_trunc('minute', f.at) as minute,
                count(*) filter (where f.state = 'completed') as completed,
                count(*) filter (where f.state = 'failed') as failed
           from fin f group by 1)
  select m.minute, coalesce(d.completed, 0), coalesce(d.failed, 0)
    from bounds
         cross join generate_series(bounds.since, date_trunc('minute', now()), interval '1 minute') as m(minute)
         left join done d on d.minute = m.minute
   order by m.minute
$$;

-- The SQL producer API on queue storage (one job): {job, duplicate}.
create function {{qs}}.enqueue_one(p_kind text, p_args jsonb, p_opts jsonb)
returns table (job jsonb, duplicate boolean) language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  i jsonb := enqueue_input(p_kind, p_args, p_opts);
  r record;
begin
  select * into r from {{qs}}.enqueue_jobs(jsonb_build_array(jsonb_build_object(
    'kind', p_kind, 'queue', i ->> 'queue', 'args', p_args, 'priority', (i ->> 'priority')::smallint,
    'run_at', i -> 'run_at', 'max_attempts', (i ->> 'max_attempts')::integer, 'tags', i -> 'tags',
    'metadata', i -> 'metadata', 'unique_key', i ->> 'unique_key', 'trace_context', i ->> 'trace_context')));
  if r.duplicate then
    return query select r.existing, true;
  else
    return query select {{qs}}.get_job(r.id), false;
  end if;
end $$;

------------------------------------------------------------------------------------------------------
-- D. The stable SQL API (any language): routed by the storage state.
------------------------------------------------------------------------------------------------------

-- Where new writes go: 'queue_storage' from mixed_transition on, else 'canonical'. Until the state is
-- active (which is final) the state row is read FOR KEY SHARE: a state change (FOR UPDATE) waits for
-- the producers that routed by the old state, and a REPEATABLE READ producer with a stale snapshot
-- gets a serialization error instead of routing wrongly.
create function write_route() returns text language plpgsql set search_path from current as $$
declare
  v text;
begin
  select transition into v from storage_state;
  if v = 'active' then
    return 'queue_storage';
  end if;
  select transition into v from storage_state for key share;
  return case when v in ('mixed_transition', 'active') then 'queue_storage' else 'canonical' end;
end $$;

-- Whether queue storage holds jobs that reads must look at.
create function read_queue_storage() returns boolean language sql stable set search_path from current as $$
  select transition in ('mixed_transition', 'active') from storage_state
$$;

create function read_canonical() returns boolean language sql stable set search_path from current as $$
  select transition <> 'active' or exists (select 1 from jobs limit 1) from storage_state
$$;

drop function enqueue(text, jsonb, jsonb);

-- The SQL producer API: enqueue inside the caller's own transaction. opts: queue, priority, run_at,
-- max_attempts, tags, metadata, unique_key (a key of your own) or unique ({by_args, by_queue,
-- period_ms}), on_conflict ('return' or 'error'), traceparent. Returns the job's columns and `duplicate`.
create function enqueue(p_kind text, p_args jsonb default '{}', p_opts jsonb default '{}')
returns table (id bigint, kind text, queue text, args jsonb, state job_state, priority smallint, attempt integer,
               max_attempts integer, run_at timestamptz, created_at timestamptz, attempted_at timestamptz,
               finalized_at timestamptz, heartbeat_at timestamptz, deadline_at timestamptz, errors jsonb,
               tags text[], metadata jsonb, result jsonb, unique_key text, callback_id uuid,
               callback_timeout_at timestamptz, lease integer, attempted_by text, trace_context text,
               effective_max_attempts integer, duplicate boolean)
language plpgsql set search_path from current as $$
#variable_conflict use_column
declare
  v_job jsonb;
  v_dup boolean;
begin
  if write_route() = 'queue_storage' then
    select e.job, e.duplicate into v_job, v_dup from {{qs}}.enqueue_one(p_kind, p_args, p_opts) e;
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
           r.effective_max_attempts, v_dup
      from jsonb_populate_record(null::jobs, v_job) r;
end $$;

create function get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current as $$
begin
  return coalesce(case when read_queue_storage() then {{qs}}.get_job(p_id) end,
                  case when read_canonical() then canonical_get_job(p_id) end);
end $$;

-- {jobs, next_cursor}; filters {state, kind, queue, tag, q, limit, cursor}.
create function list_jobs(p_filter jsonb default '{}') returns jsonb
language plpgsql stable set search_path from current as $$
declare
  v_q jsonb;
  v_c jsonb;
  v_limit integer := page_limit(p_filter);
  v_rows jsonb[];
begin
  if not read_queue_storage() then
    return canonical_list_jobs(p_filter);
  end if;
  v_q := {{qs}}.list_jobs(p_filter);
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

create function cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
begin
  if read_canonical() and exists (select 1 from jobs where id = p_id) then
    return canonical_cancel_job(p_id);
  end if;
  if read_queue_storage() then
    return {{qs}}.cancel_job(p_id);
  end if;
  perform raise_api('job_not_found', format('job %s not found', p_id));
end $$;

create function retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current as $$
declare
  v jobs;
begin
  if read_queue_storage() and {{qs}}.get_job(p_id) is not null then
    return {{qs}}.retry_job(p_id);
  end if;
  select * into v from jobs where id = p_id;
  if v.id is not null then
    if v.state not in ('completed', 'failed', 'cancelled') then
      perform raise_api('invalid_state', format('job %s is %s: only a completed, failed or cancelled job can be retried',
                                                p_id, v.state));
    end if;
    -- From mixed_transition on, new work runs on queue storage: a retained canonical job is retried there.
    if read_queue_storage() then
      perform {{qs}}.adopt(array[p_id], true);
      return {{qs}}.get_job(p_id);
    end if;
    return canonical_retry_job(p_id);
  end if;
  perform raise_api('job_not_found', format('job %s not found', p_id));
end $$;

-- Resolves a callback wherever it lives: 'complete', 'fail', 'heartbeat' (HTTP) or 'resume' (in-process).
create function resolve_callback(
  p_id uuid, p_action text, p_payload jsonb default null, p_error text default null, p_retryable boolean default null,
  p_timeout_seconds integer default null
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
#variable_conflict use_column
begin
  if exists (select 1 from callbacks c where c.id = p_id) then
    return query select * from canonical_resolve_callback(p_id, p_action, p_payload, p_error, p_retryable, p_timeout_seconds);
  else
    return query select * from {{qs}}.resolve_callback(p_id, p_action, p_payload, p_error, p_retryable, p_timeout_seconds);
  end if;
end $$;

-- Counts a refused callback request (bad signature, bad body, too large) on the pending callback it
-- names, wherever it lives: the count and the last refusal {status, code, at}, in place (one row, no
-- growth). Whether a pending callback was found.
create function record_callback_rejection(p_id uuid, p_status integer, p_code text) returns boolean
language plpgsql set search_path from current as $$
declare
  v_last jsonb := jsonb_build_object('status', p_status, 'code', p_code, 'at', iso(now()));
begin
  update callbacks set rejected_count = rejected_count + 1, last_rejection = v_last
   where id = p_id and state = 'pending';
  if found then
    return true;
  end if;
  update {{qs}}.callbacks set rejected_count = rejected_count + 1, last_rejection = v_last
   where id = p_id and state = 'pending';
  return found;
end $$;

-- The cluster's health as `svc health --json` reports it: runtimes heartbeated within p_live_ms are
-- live; a live runtime whose last report was not ready is unhealthy.
create function health(p_expected_version integer, p_live_ms bigint default 90000) returns jsonb
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

------------------------------------------------------------------------------------------------------
-- E. The storage transition (canonical -> prepared -> mixed_transition -> active), docs/guide/upgrade.md.
------------------------------------------------------------------------------------------------------

-- Moves canonical jobs into queue storage, keeping their id, attempt, lease, errors and callbacks (same
-- callback ids); their canonical rows are deleted. Available jobs join the end of their lane, scheduled and
-- retryable ones go to deferred, a parked HTTP attempt (waiting_external with a pending HTTP callback) to
-- parked with its callback. With p_retry, finished jobs are retried into queue storage (attempt 0). Jobs in
-- other states (running; waiting for an in-process handler) stay where they are. Returns how many moved.
create function {{qs}}.adopt(p_ids bigint[], p_retry boolean default false) returns integer
language plpgsql set search_path from current as $$
declare
  v_rows jsonb;
  v_ids bigint[];
  v_ready jsonb;
  v_shards jsonb;
  v_slot smallint;
begin
  select coalesce(jsonb_agg(to_jsonb(j) order by j.id), '[]') into v_rows
    from (select * from jobs j
           where j.id = any(p_ids)
             and (j.state in ('scheduled', 'retryable', 'available')
                  or (j.state = 'waiting_external' and exists (
                        select 1 from callbacks c where c.id = j.callback_id and c.kind = 'http' and c.state = 'pending'))
                  or (p_retry and j.state in ('completed', 'failed', 'cancelled')))
           order by j.id for update) j;
  if jsonb_array_length(v_rows) = 0 then
    return 0;
  end if;
  v_ids := array(select (x ->> 'id')::bigint from jsonb_array_elements(v_rows) x);
  -- A retried job starts over; the others keep their place in their life.
  if p_retry then
    select jsonb_agg(x || jsonb_build_object(
             'state', 'available', 'attempt', 0, 'run_at', now(), 'finalized_at', null, 'callback_id', null))
      into v_rows from jsonb_array_elements(v_rows) x;
  end if;
  insert into {{qs}}.callbacks (id, job_id, attempt, lease, kind, state, resolution, payload, error, deadline_at,
                                created_at, resolved_at, rejected_count, last_rejection)
  select c.id, c.job_id, c.attempt, c.lease, c.kind, c.state, c.resolution, c.payload, c.error, c.deadline_at,
         c.created_at, c.resolved_at, c.rejected_count, c.last_rejection
    from callbacks c where c.job_id = any(v_ids)
  on conflict (id) do nothing;
  insert into {{qs}}.unique_keys (unique_key, job_id)
  select x ->> 'unique_key', (x ->> 'id')::bigint from jsonb_array_elements(v_rows) x
   where x ->> 'unique_key' is not null
  on conflict do nothing;
  -- deferred
  insert into {{qs}}.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                               created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                               attempted_by, effective_max_attempts)
  select j.id, j.state::text, j.run_at, j.queue, j.priority, j.kind, j.args, j.attempt, j.max_attempts, j.lease,
         j.created_at, j.errors, j.tags, j.metadata, j.unique_key, j.trace_context, j.attempted_at, j.attempted_by,
         j.effective_max_attempts
    from jsonb_populate_recordset(null::jobs, v_rows) j where j.state in ('scheduled', 'retryable');
  -- parked
  insert into {{qs}}.parked (job_id, lease, state, queue, priority, kind, args, attempt, max_attempts, run_at,
                             created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                             attempted_by, deadline_at, prefetched, effective_max_attempts, retry_delay_ms)
  select j.id, j.lease, 'waiting_external', j.queue, j.priority, j.kind, j.args, j.attempt, j.max_attempts,
         j.run_at, j.created_at, j.errors, j.tags, j.metadata, j.unique_key, j.trace_context, j.attempted_at,
         j.attempted_by, null, false, j.effective_max_attempts, j.retry_delay_ms
    from jsonb_populate_recordset(null::jobs, v_rows) j where j.state = 'waiting_external';
  -- ready, at the end of their lanes
  select jsonb_agg(x) into v_ready from jsonb_array_elements(v_rows) x where x ->> 'state' = 'available';
  if v_ready is not null then
    v_shards := {{qs}}.lock_lanes(v_ready);
    v_slot := {{qs}}.current_slot();
    insert into {{qs}}.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, attempted_at,
                              attempted_by)
    select v_slot, j.queue, j.priority, (v_shards ->> (j.queue || ':' || j.priority))::smallint,
           nextval('{{qs}}.ready_seq'), j.id, j.kind, j.args, j.attempt, j.max_attempts, j.lease, j.run_at,
           j.created_at, j.errors, j.tags, j.metadata, j.unique_key, j.trace_context, j.attempted_at, j.attempted_by
      from jsonb_populate_recordset(null::jobs, v_ready) j order by j.id;
    perform pg_notify(current_schema() || '_jobs', q)
       from (select distinct x ->> 'queue' as q from jsonb_array_elements(v_ready) x) y;
  end if;
  delete from jobs where id = any(v_ids);
  return cardinality(v_ids);
end $$;

-- The leader's part of a mixed transition: canonical scheduled and retryable jobs, and parked HTTP
-- attempts, move to queue storage (available ones are drained in place by the workers). Returns how many.
create function {{qs}}.adopt_waiting(p_batch integer default 1000) returns integer
language plpgsql set search_path from current as $$
declare
  v_ids bigint[];
  v_n integer := 0;
begin
  if (select transition from storage_state) <> 'mixed_transition' then
    return 0;
  end if;
  loop
    v_ids := array(
      select j.id from jobs j
       where j.state in ('scheduled', 'retryable')
          or (j.state = 'waiting_external' and exists (
                select 1 from callbacks c where c.id = j.callback_id and c.kind = 'http' and c.state = 'pending'))
       order by j.id limit p_batch);
    exit when cardinality(v_ids) = 0;
    v_n := v_n + {{qs}}.adopt(v_ids);
    exit when cardinality(v_ids) < p_batch;
  end loop;
  return v_n;
end $$;

-- While mixed (and after), a row an older producer inserts straight into canonical's jobs table moves to
-- queue storage at once, keeping its id (the producer's INSERT ... RETURNING still returns it). A unique
-- key already held in queue storage raises unique_violation, as canonical's own index would.
create function canonical_jobs_moved() returns trigger
language plpgsql set search_path from current as $$
begin
  if (select transition from storage_state) in ('mixed_transition', 'active') then
    if new.unique_key is not null and new.state in ('scheduled', 'available', 'retryable')
       and exists (select 1 from {{qs}}.unique_keys k where k.unique_key = new.unique_key) then
      raise exception 'duplicate key value violates unique constraint on the unique key %', new.unique_key
        using errcode = 'unique_violation';
    end if;
    perform {{qs}}.adopt(array[new.id]);
  end if;
  return null;
end $$;

create trigger jobs_moved_to_queue_storage after insert on jobs
  for each row execute function canonical_jobs_moved();

-- Snoozing on canonical; while mixed the job moves to queue storage (a job that snoozes forever would
-- otherwise keep the transition from finishing). Whether the attempt was still current.
create function canonical_snooze(p_id bigint, p_lease integer, p_delay_ms bigint) returns boolean
language plpgsql set search_path from current as $$
begin
  update jobs
     set state = 'scheduled', attempt = attempt - 1, run_at = now() + p_delay_ms * interval '1 millisecond',
         heartbeat_at = null, deadline_at = null
   where id = p_id and lease = p_lease and state = 'running';
  if not found then
    return false;
  end if;
  if (select transition from storage_state) = 'mixed_transition' then
    perform {{qs}}.adopt(array[p_id]);
  end if;
  return true;
end $$;

-- Every object queue storage needs (its tables and functions); the names of those that are missing.
create function {{qs}}.missing_objects() returns text[]
language sql stable set search_path from current as $$
  select coalesce(array_agg(n), '{}') from (
    select t as n from unnest(array['ring_rotations', 'lanes', 'ready', 'spent', 'closed', 'starts', 'deferred',
                                    'parked', 'unique_keys', 'callbacks', 'history', 'jobs']) t
     where to_regclass({{qs_name}} || '.' || t) is null
    union all
    select f from unnest(array['claim', 'enqueue_jobs', 'close_attempts', 'complete', 'park', 'promote', 'rescue',
                               'prune', 'rotate', 'adopt', 'resolve_callback']) f
     where not exists (select 1 from pg_proc p join pg_namespace ns on ns.oid = p.pronamespace
                        where ns.nspname = {{qs_name}} and p.proname = f)) x
$$;

-- Queue-storage tables that hold job data (commented 'svc:job-data'), read from the catalog, that are
-- not empty.
create function {{qs}}.nonempty_job_tables() returns text[]
language plpgsql stable set search_path from current as $$
declare
  r record;
  v text[] := '{}';
  v_any boolean;
begin
  for r in
    select c.oid::regclass::text as rel from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
     where ns.nspname = {{qs_name}} and c.relkind in ('r', 'p')
       and obj_description(c.oid, 'pg_class') = 'svc:job-data'
  loop
    execute format('select exists (select 1 from %s)', r.rel) into v_any;
    if v_any then
      v := v || r.rel;
    end if;
  end loop;
  return v;
end $$;

-- The transition's state for `svc storage status --json` and GET /api/storage. Reads without locks.
create function storage_status(p_live_ms bigint default 90000) returns jsonb
language plpgsql stable set search_path from current as $$
declare
  s storage_state;
  v_backlog bigint;
  v_missing text[];
  v_canon_only text[];
  v_capable text[];
  v_blockers text[] := '{}';
  v_abort boolean;
  v_next text;
  v_nonempty text[];
begin
  select * into s from storage_state;
  select count(*) into v_backlog from jobs
   where state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable');
  v_missing := {{qs}}.missing_objects();
  select coalesce(array_agg(id order by id) filter (where not ('queue_storage' = any(engines))), '{}'),
         coalesce(array_agg(id order by id) filter (where 'queue_storage' = any(engines)), '{}')
    into v_canon_only, v_capable
    from runtimes where heartbeat_at > now() - p_live_ms * interval '1 millisecond';
  if s.transition = 'canonical' then
    v_next := 'svc storage prepare';
    if cardinality(v_missing) > 0 then
      v_blockers := v_blockers || format('queue-storage objects missing: %s (run svc migrate)', array_to_string(v_missing, ', '));
    end if;
    v_abort := true;
  elsif s.transition = 'prepared' then
    v_next := 'svc storage enter-mixed-transition';
    if cardinality(v_canon_only) > 0 then
      v_blockers := v_blockers || format('%s live runtime(s) can execute only canonical: %s (upgrade or stop them)',
                                         cardinality(v_canon_only), array_to_string(v_canon_only, ', '));
    end if;
    if cardinality(v_capable) = 0 then
      v_blockers := v_blockers || 'no live runtime can execute queue storage (start a worker of this version)'::text;
    end if;
    v_abort := true;
  elsif s.transition = 'mixed_transition' then
    v_next := 'svc storage finalize';
    if v_backlog > 0 then
      v_blockers := v_blockers || format('canonical backlog: %s unfinished job(s) still in the canonical table', v_backlog);
    end if;
    if cardinality(v_canon_only) > 0 then
      v_blockers := v_blockers || format('%s live runtime(s) can execute only canonical: %s',
                                         cardinality(v_canon_only), array_to_string(v_canon_only, ', '));
    end if;
    v_nonempty := {{qs}}.nonempty_job_tables();
    v_abort := cardinality(v_nonempty) = 0;
  else
    v_abort := false;
  end if;
  return jsonb_build_object(
    'state', s.transition,
    'engine', case when s.transition in ('mixed_transition', 'active') then 'queue_storage' else 'canonical' end,
    'prepared_engine', s.prepared_engine,
    'canonical_backlog', v_backlog,
    'queue_storage_ready', cardinality(v_missing) = 0,
    'queue_storage_schema', s.qs_schema,
    'runtimes', jsonb_build_object('canonical_only', cardinality(v_canon_only),
                                   'queue_storage_capable', cardinality(v_capable)),
    'blockers', to_jsonb(v_blockers),
    'abort_possible', v_abort,
    'next_step', v_next);
end $$;

-- One step of the transition, under the state row's lock (FOR UPDATE; the caller sets lock_timeout):
-- 'prepare', 'enter-mixed-transition', 'finalize', 'abort'. Returns {outcome: changed | noop | blocked,
-- state (after), message}. Every change is announced on <schema>_storage.
create function storage_step(p_command text, p_live_ms bigint default 90000) returns jsonb
language plpgsql set search_path from current as $$
declare
  s storage_state;
  v_status jsonb;
  v_to text;
  v_blockers jsonb;
  v_nonempty text[];
begin
  select * into s from storage_state for update;
  v_status := storage_status(p_live_ms);
  v_blockers := v_status -> 'blockers';
  if p_command = 'prepare' then
    if s.transition = 'prepared' then
      return jsonb_build_object('outcome', 'noop', 'state', s.transition, 'message', 'already prepared');
    elsif s.transition <> 'canonical' then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition,
        'message', format('prepare applies to a canonical cluster; this one is %s', s.transition));
    elsif jsonb_array_length(v_blockers) > 0 then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition, 'message', v_blockers ->> 0);
    end if;
    v_to := 'prepared';
  elsif p_command = 'enter-mixed-transition' then
    if s.transition = 'mixed_transition' then
      return jsonb_build_object('outcome', 'noop', 'state', s.transition, 'message', 'already in mixed_transition');
    elsif s.transition <> 'prepared' then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition,
        'message', case when s.transition = 'canonical' then 'the cluster is not prepared: run svc storage prepare first'
                        else format('enter-mixed-transition applies to a prepared cluster; this one is %s', s.transition) end);
    elsif jsonb_array_length(v_blockers) > 0 then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition, 'message', v_blockers ->> 0);
    end if;
    v_to := 'mixed_transition';
  elsif p_command = 'finalize' then
    if s.transition = 'active' then
      return jsonb_build_object('outcome', 'noop', 'state', s.transition, 'message', 'already active');
    elsif s.transition <> 'mixed_transition' then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition,
        'message', format('finalize applies to a cluster in mixed_transition; this one is %s', s.transition));
    elsif jsonb_array_length(v_blockers) > 0 then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition, 'message', v_blockers ->> 0);
    end if;
    v_to := 'active';
  elsif p_command = 'abort' then
    if s.transition = 'canonical' then
      return jsonb_build_object('outcome', 'noop', 'state', s.transition, 'message', 'nothing to abort');
    elsif s.transition = 'active' then
      return jsonb_build_object('outcome', 'blocked', 'state', s.transition,
        'message', 'the transition is finished (active): going back is not possible; restore from a backup');
    elsif s.transition = 'mixed_transition' then
      v_nonempty := {{qs}}.nonempty_job_tables();
      if cardinality(v_nonempty) > 0 then
        return jsonb_build_object('outcome', 'blocked', 'state', s.transition,
          'message', format('queue storage holds jobs (%s): going back is not possible; finish with svc storage finalize',
                            array_to_string(v_nonempty, ', ')));
      end if;
    end if;
    v_to := 'canonical';
  else
    raise exception 'storage_step: unknown command %', p_command using errcode = '22023';
  end if;
  update storage_state
     set transition = v_to,
         engine = case when v_to in ('mixed_transition', 'active') then 'queue_storage' else 'canonical' end,
         prepared_engine = case when v_to = 'canonical' then null else 'queue_storage' end,
         epoch = epoch + 1, updated_at = now();
  perform pg_notify(current_schema() || '_storage', v_to);
  return jsonb_build_object('outcome', 'changed', 'state', v_to, 'message', format('%s -> %s', s.transition, v_to));
end $$;

-- Canonical's batch insert, with the result shape of queue storage's enqueue_jobs: a job whose unique key
-- is held by an unfinished job is not inserted and comes back with duplicate = true and that job.
create function canonical_enqueue_jobs(p_jobs jsonb)
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
  for x in select e from jsonb_array_elements(v_out) e where e ? 'ord' order by (e ->> 'ord')::integer loop
    v_existing := null;
    if (x ->> 'duplicate')::boolean then
      -- A new statement: the job that holds the key may have committed meanwhile.
      v_existing := canonical_get_job((select j.id from jobs j where j.unique_key = x ->> 'unique_key'
                                         and j.state in ('scheduled', 'available', 'running', 'waiting_external',
                                                         'retryable') limit 1));
      if v_existing is null then
        return query select (x ->> 'ord')::integer, r.id, r.state, r.run_at, r.created_at, r.unique_key, r.duplicate,
                            r.existing
                       from canonical_enqueue_jobs(jsonb_build_array(p_jobs -> ((x ->> 'ord')::integer))) r;
        continue;
      end if;
    end if;
    return query select (x ->> 'ord')::integer, (x ->> 'id')::bigint, x ->> 'state', (x ->> 'run_at')::timestamptz,
                        (x ->> 'created_at')::timestamptz, x ->> 'unique_key', (x ->> 'duplicate')::boolean, v_existing;
  end loop;
end $$;

-- The batch insert of the TypeScript client, routed by the storage state in the caller's statement (see
-- write_route), so a producer never writes to the engine a state change has just left.
create function enqueue_jobs(p_jobs jsonb)
returns table (ord integer, id bigint, state text, run_at timestamptz, created_at timestamptz,
               unique_key text, duplicate boolean, existing jsonb)
language plpgsql set search_path from current as $$
begin
  if write_route() = 'queue_storage' then
    return query select * from {{qs}}.enqueue_jobs(p_jobs);
  else
    return query select * from canonical_enqueue_jobs(p_jobs);
  end if;
end $$;

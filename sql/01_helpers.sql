-- Shared helpers of both engines: JSON shapes, unique keys, backoff, enqueue input, job cursors and filters.

-- Default retry backoff: 2^attempt seconds plus up to 25 % jitter, capped at 24 h.
create or replace function backoff_delay(attempt integer) returns interval language sql volatile as $$
  select make_interval(secs => least(power(2, least(attempt, 30))::float8, 86400) * (1 + random() * 0.25))
$$;

-- RFC 3339 in UTC with milliseconds, exactly as JavaScript's Date.prototype.toISOString writes it. Built-in
-- functions only and no settings, so the planner inlines it (with `set search_path` each call planned again).
create or replace function iso(t timestamptz) returns text language sql stable as $$
  select to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A job as every JSON surface shows it (snake_case), from the jsonb of a row with the job columns.
create or replace function job_json(r jsonb) returns jsonb language sql stable set search_path from current as $$
  select jsonb_build_object(
    'id', r -> 'id', 'kind', r -> 'kind', 'queue', r -> 'queue', 'args', r -> 'args', 'state', r -> 'state',
    'priority', r -> 'priority', 'attempt', r -> 'attempt', 'max_attempts', r -> 'max_attempts',
    'effective_max_attempts', r -> 'effective_max_attempts',
    'run_at', iso((r ->> 'run_at')::timestamptz), 'created_at', iso((r ->> 'created_at')::timestamptz),
    'claimed_at', iso((r ->> 'claimed_at')::timestamptz),
    'attempted_at', iso((r ->> 'attempted_at')::timestamptz),
    'finalized_at', iso((r ->> 'finalized_at')::timestamptz),
    'heartbeat_at', iso((r ->> 'heartbeat_at')::timestamptz),
    'deadline_at', iso((r ->> 'deadline_at')::timestamptz),
    'errors', r -> 'errors', 'tags', r -> 'tags', 'metadata', r -> 'metadata', 'result', r -> 'result',
    'unique_key', r -> 'unique_key', 'limit_key', r -> 'limit_key', 'callback_id', r -> 'callback_id',
    'callback_timeout_at', iso((r ->> 'callback_timeout_at')::timestamptz),
    'attempted_by', r -> 'attempted_by', 'lease', r -> 'lease')
$$;

-- Raises one of the stable errors of the SQL API: SQLSTATE P0001, the code in HINT.
create or replace function raise_api(p_code text, p_message text) returns void language plpgsql set search_path from current set jit = off as $$
begin
  raise exception using errcode = 'P0001', message = p_message, hint = p_code;
end $$;

-- The one definition of a unique key: the kind, plus the queue, the args and the time bucket of run_at
-- when given (null leaves a part out). args enter as jsonb text, so key order and spacing do not matter.
create or replace function unique_key(p_kind text, p_args jsonb, p_queue text, p_period_ms bigint,
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
create or replace function opts_unique_key(p_kind text, p_args jsonb, p_queue text, p_run_at timestamptz, p_opts jsonb)
returns text language plpgsql immutable set search_path from current set jit = off as $$
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
create or replace function backoff_ms(attempt integer) returns bigint language sql volatile as $$
  select round(least(power(2, least(attempt, 30))::float8, 86400) * (1 + random() * 0.25) * 1000)::bigint
$$;

-- Validates the options of enqueue (the SQL producer API) and fills the defaults; raises 22023 naming
-- the problem. Returns {queue, priority, max_attempts, run_at, tags, metadata, unique_key, limit_key,
-- trace_context}.
create or replace function enqueue_input(p_kind text, p_args jsonb, p_opts jsonb) returns jsonb
language plpgsql stable set search_path from current set jit = off as $$
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
  if coalesce(jsonb_typeof(v_opts -> 'limit_key'), 'null') <> 'null'
     and (jsonb_typeof(v_opts -> 'limit_key') <> 'string' or length(v_opts ->> 'limit_key') not between 1 and 255) then
    raise exception 'svc.enqueue: limit_key must be a string of 1 to 255 characters' using errcode = '22023';
  end if;
  if v_opts ? 'on_conflict' and coalesce(v_opts ->> 'on_conflict', '') not in ('return', 'error') then
    raise exception 'svc.enqueue: on_conflict must be "return" or "error"' using errcode = '22023';
  end if;
  return jsonb_build_object(
    'queue', v_queue, 'priority', v_priority, 'max_attempts', v_max, 'run_at', v_run_at, 'tags', v_tags,
    'metadata', v_meta, 'unique_key', opts_unique_key(p_kind, p_args, v_queue, v_run_at, v_opts),
    'limit_key', v_opts ->> 'limit_key', 'trace_context', v_opts ->> 'traceparent');
end $$;

-- The keyset cursor of job listings: base64 of "id:<n>" (without padding).
create or replace function encode_job_cursor(p_id bigint) returns text language sql immutable set search_path from current as $$
  select rtrim(encode(convert_to('id:' || p_id, 'UTF8'), 'base64'), '=')
$$;

create or replace function decode_job_cursor(p_cursor text) returns bigint language plpgsql immutable set search_path from current set jit = off as $$
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
create or replace function job_filter_sql(p jsonb) returns text language plpgsql immutable set search_path from current set jit = off as $$
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

create or replace function page_limit(p jsonb) returns integer language sql immutable set search_path from current as $$
  select least(greatest(coalesce((p ->> 'limit')::integer, 100), 1), 1000)
$$;

-- {jobs, next_cursor} from the job rows of a page query that fetched limit + 1 rows.
create or replace function job_page(p_rows jsonb[], p_limit integer) returns jsonb language sql stable set search_path from current as $$
  select jsonb_build_object(
    'jobs', coalesce((select jsonb_agg(job_json(r) order by o) from unnest(p_rows[1:p_limit]) with ordinality as x(r, o)), '[]'),
    'next_cursor', case when cardinality(p_rows) > p_limit then encode_job_cursor((p_rows[p_limit] ->> 'id')::bigint) end)
$$;

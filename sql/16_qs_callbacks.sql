-- Queue storage: callbacks (register, resolve, expire).

-- Registers a callback for the open attempt (job, lease); older pending callbacks of the job are
-- superseded. Null when the attempt is no longer open.
create or replace function svc_qs.register_callback(p_job bigint, p_lease integer, p_timeout_ms bigint, p_kind text)
returns uuid language plpgsql set search_path from current set jit = off as $$
declare
  v_id uuid := gen_random_uuid();
  v_attempt integer;
begin
  perform pg_advisory_xact_lock(hashtextextended('svc_qs' || ':job:' || p_job, 0));
  if svc_qs.attempt_place(p_job, p_lease) is null then
    return null;
  end if;
  select j.attempt into v_attempt from svc_qs.jobs j where j.id = p_job and j.lease = p_lease;
  update svc_qs.callbacks set state = 'superseded', resolved_at = now() where job_id = p_job and state = 'pending';
  insert into svc_qs.callbacks (id, job_id, attempt, lease, kind, deadline_at)
  values (v_id, p_job, coalesce(v_attempt, 0), p_lease, p_kind, now() + p_timeout_ms * interval '1 millisecond');
  return v_id;
end $$;

-- Resolves a callback as canonical's resolve_callback does: 'complete', 'resume', 'fail' or 'heartbeat'.
-- The callback row is locked, so of concurrent resolutions exactly one wins; the attempt is ended
-- through close_attempts, so a worker's own outcome and a callback never both apply.
create or replace function svc_qs.resolve_callback(
  p_id uuid, p_action text, p_payload jsonb, p_error text, p_retryable boolean, p_timeout_seconds integer
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  v_cb svc_qs.callbacks;
  v_place text;
  v_state text;
  v_deadline timestamptz;
begin
  select * into v_cb from svc_qs.callbacks c where c.id = p_id for update;
  if v_cb.id is null then
    return query select 'not_found'::text, null::bigint, null::job_state, null::timestamptz;
    return;
  end if;
  v_place := svc_qs.attempt_place(v_cb.job_id, v_cb.lease);
  if v_cb.state = 'pending' and v_place is null then
    update svc_qs.callbacks c set state = 'superseded', resolved_at = now() where c.id = p_id;
    v_cb.state := 'superseded';
  end if;
  if v_cb.state <> 'pending' or v_cb.deadline_at <= now() then
    return query select 'not_pending'::text, v_cb.job_id, (select j.state from svc_qs.jobs j where j.id = v_cb.job_id),
                        v_cb.deadline_at;
    return;
  end if;
  if p_action in ('complete', 'fail') then
    select c.state into v_state from svc_qs.close_attempts(jsonb_build_array(jsonb_build_object(
      'ord', 0, 'id', v_cb.job_id, 'lease', v_cb.lease,
      'action', case when p_action = 'complete' then 'complete' else 'fail' end,
      'result', p_payload, 'keep', true, 'error', p_error, 'terminal', not coalesce(p_retryable, false)))) c;
    if v_state is null then
      return query select 'not_pending'::text, v_cb.job_id,
                          (select j.state from svc_qs.jobs j where j.id = v_cb.job_id), v_cb.deadline_at;
      return;
    end if;
    update svc_qs.callbacks c
       set state = case when p_action = 'complete' then 'completed' else 'failed' end,
           resolution = case when p_action = 'complete' then 'completed' end,
           payload = case when p_action = 'complete' then p_payload end,
           error = case when p_action = 'fail' then p_error end, resolved_at = now()
     where c.id = p_id;
  elsif p_action = 'resume' then
    update svc_qs.callbacks c set state = 'completed', resolution = 'resumed', payload = p_payload, resolved_at = now()
     where c.id = p_id;
    update svc_qs.parked p set state = 'running' where p.job_id = v_cb.job_id and p.lease = v_cb.lease;
    v_state := 'running';
  elsif p_action = 'heartbeat' then
    v_deadline := now() + p_timeout_seconds * interval '1 second';
    update svc_qs.callbacks c set deadline_at = v_deadline where c.id = p_id;
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
create or replace function svc_qs.resolve_callbacks(p_items json)
returns table (ord integer, outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  r record;
begin
  for r in
    select i.*
      from json_to_recordset(p_items) as i(ord integer, id uuid, action text, payload text, error text,
                                           retryable boolean, timeout_seconds integer)
     order by (select c.job_id from svc_qs.callbacks c where c.id = i.id) nulls last, i.ord
  loop
    return query select r.ord, x.outcome, x.job_id, x.state, x.timeout_at
      from svc_qs.resolve_callback(r.id, r.action, r.payload::jsonb, r.error, r.retryable, r.timeout_seconds) x;
  end loop;
end $$;

-- Parked attempts whose callback deadline passed: retryable (or failed when exhausted) with the error
-- `callback timed out`; pending callbacks of attempts that already ended are marked expired.
create or replace function svc_qs.expire_callbacks(p_batch integer default 1000)
returns table (id bigint, kind text, state text, callback_id uuid)
language plpgsql set search_path from current set jit = off as $$
#variable_conflict use_column
declare
  cb record;
  v_state text;
  v_place text;
begin
  for cb in
    select c.* from svc_qs.callbacks c where c.state = 'pending' and c.deadline_at < now()
     order by c.deadline_at limit p_batch for update skip locked
  loop
    v_place := svc_qs.attempt_place(cb.job_id, cb.lease);
    if v_place = 'ring' or v_place = 'running' then
      continue; -- the handler still runs: only its own outcome or rescue ends it
    end if;
    v_state := null;
    if v_place = 'waiting_external' then
      select c.state into v_state from svc_qs.close_attempts(jsonb_build_array(jsonb_build_object(
        'ord', 0, 'id', cb.job_id, 'lease', cb.lease, 'action', 'fail', 'error', 'callback timed out',
        'terminal', false))) c;
    end if;
    update svc_qs.callbacks c set state = 'expired', resolved_at = now() where c.id = cb.id;
    if v_state is not null then
      perform pg_notify(current_schema() || '_callbacks', cb.id::text);
      return query select cb.job_id, (select j.kind from svc_qs.jobs j where j.id = cb.job_id limit 1), v_state, cb.id;
    end if;
  end loop;
end $$;

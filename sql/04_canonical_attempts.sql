-- The canonical engine's attempt closures and callbacks (the claim and completion statements live in
-- TypeScript, src/storage/canonical).


-- Fails the attempt (id, lease) if the job is still in one of `p_from`: `failed` when the error is
-- terminal or the attempt was the last the policy allows, else `retryable` after the delay (`p_delay_ms`
-- when given, e.g. a Retry-After, else the delay stored at claim, else the default backoff). The one
-- path for a handler's error, rescue, a callback timeout and a `fail` callback. Null when the attempt
-- is no longer current.
create or replace function canonical_fail_attempt(p_id bigint, p_lease integer, p_error text, p_terminal boolean,
                                       p_delay_ms bigint default null,
                                       p_from job_state[] default '{running,waiting_external}',
                                       p_started_at timestamptz default null)
returns jobs language plpgsql set search_path from current set jit = off as $$
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
         -- the handler's start when the worker reported it, else the claim (rescue, callback timeout)
         attempted_at = coalesce(p_started_at, j.attempted_at, j.claimed_at),
         errors = j.errors || jsonb_build_array(jsonb_build_object(
           'attempt', j.attempt, 'at', iso(now()), 'error', p_error, 'terminal', v_final))
   where j.id = p_id
  returning * into v;
  -- While mixed, a canonical retry moves the job to queue storage (the transition then converges).
  if not v_final and (select transition from storage_state) = 'mixed_transition' then
    perform svc_qs.adopt(array[p_id]);
  end if;
  return v;
end $$;

------------------------------------------------------------------------------------------------------
-- Canonical: the attempt is counted at claim as well (no start record). A held attempt given back by a
-- graceful shutdown, its TTL or a pause is `available` again with its attempt refunded and its run_at
-- kept; the lease keeps its new value, so a late writer of that claim changes nothing.
------------------------------------------------------------------------------------------------------
create or replace function canonical_give_back(p_id bigint, p_lease integer) returns boolean
language plpgsql set search_path from current set jit = off as $$
declare
  v_queue text;
begin
  update jobs set state = 'available', attempt = attempt - 1, claimed_at = null, attempted_at = null, attempted_by = null,
         heartbeat_at = null, deadline_at = null
   where id = p_id and lease = p_lease and state = 'running'
  returning queue into v_queue;
  if v_queue is null then
    return false;
  end if;
  perform pg_notify(current_schema() || '_jobs', v_queue);
  return true;
end $$;

-- Snoozing on canonical; while mixed the job moves to queue storage (a job that snoozes forever would
-- otherwise keep the transition from finishing). Whether the attempt was still current.
create or replace function canonical_snooze(p_id bigint, p_lease integer, p_delay_ms bigint) returns boolean
language plpgsql set search_path from current set jit = off as $$
begin
  update jobs
     set state = 'scheduled', attempt = attempt - 1, run_at = now() + p_delay_ms * interval '1 millisecond',
         heartbeat_at = null, deadline_at = null, attempted_at = coalesce(attempted_at, claimed_at)
   where id = p_id and lease = p_lease and state = 'running';
  if not found then
    return false;
  end if;
  if (select transition from storage_state) = 'mixed_transition' then
    perform svc_qs.adopt(array[p_id]);
  end if;
  return true;
end $$;

-- Registers a callback for the running attempt (job id + run lease); supersedes older pending ones.
create or replace function register_callback(p_job bigint, p_lease integer, p_timeout_ms bigint, p_kind text)
returns uuid language plpgsql set search_path from current set jit = off as $$
declare
  v_id uuid := gen_random_uuid();
  v_job jobs;
begin
  select * into v_job from jobs where id = p_job for update;
  if v_job.id is null or v_job.lease <> p_lease or v_job.state <> 'running' then
    return null;
  end if;
  update callbacks set state = 'superseded', resolved_at = now() where job_id = p_job and state = 'pending';
  insert into callbacks (id, job_id, attempt, lease, kind, deadline_at)
    values (v_id, p_job, v_job.attempt, p_lease, p_kind, now() + p_timeout_ms * interval '1 millisecond');
  update jobs set callback_id = v_id, callback_timeout_at = now() + p_timeout_ms * interval '1 millisecond'
    where id = p_job;
  return v_id;
end $$;

create or replace function canonical_resolve_callback(
  p_id uuid, p_action text, p_payload jsonb, p_error text, p_retryable boolean, p_timeout_seconds integer
) returns table (outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current set jit = off as $$
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
      deadline_at = null, attempted_at = coalesce(j.attempted_at, j.claimed_at) where j.id = v_job.id;
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

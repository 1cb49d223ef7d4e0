-- The storage transition from canonical to queue storage: which engine takes writes and serves reads,
-- adoption of canonical jobs, and the staged steps of `svc storage` (docs/guide/upgrade.md).


-- Where new writes go: 'queue_storage' from mixed_transition on, else 'canonical'. Until the state is
-- active (which is final) the state row is read FOR KEY SHARE: a state change (FOR UPDATE) waits for
-- the producers that routed by the old state, and a REPEATABLE READ producer with a stale snapshot
-- gets a serialization error instead of routing wrongly.
create or replace function write_route() returns text language plpgsql set search_path from current set jit = off as $$
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
create or replace function read_queue_storage() returns boolean language sql stable set search_path from current as $$
  select transition in ('mixed_transition', 'active') from storage_state
$$;

create or replace function read_canonical() returns boolean language sql stable set search_path from current as $$
  select transition <> 'active' or exists (select 1 from jobs limit 1) from storage_state
$$;


-- Moves canonical jobs into queue storage, keeping their id, attempt, lease, errors and callbacks (same
-- callback ids); their canonical rows are deleted. Available jobs join the end of their lane, scheduled and
-- retryable ones go to deferred, a parked HTTP attempt (waiting_external with a pending HTTP callback) to
-- parked with its callback. With p_retry, finished jobs are retried into queue storage (attempt 0). Jobs in
-- other states (running; waiting for an in-process handler) stay where they are. Returns how many moved.
create or replace function svc_qs.adopt(p_ids bigint[], p_retry boolean default false) returns integer
language plpgsql set search_path from current set jit = off as $$
declare
  v_rows jsonb;
  v_ids bigint[];
  v_ready jsonb;
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
  insert into svc_qs.callbacks (id, job_id, attempt, lease, kind, state, resolution, payload, error, deadline_at,
                                created_at, resolved_at, rejected_count, last_rejection)
  select c.id, c.job_id, c.attempt, c.lease, c.kind, c.state, c.resolution, c.payload, c.error, c.deadline_at,
         c.created_at, c.resolved_at, c.rejected_count, c.last_rejection
    from callbacks c where c.job_id = any(v_ids)
  on conflict (id) do nothing;
  insert into svc_qs.unique_keys (unique_key, job_id)
  select x ->> 'unique_key', (x ->> 'id')::bigint from jsonb_array_elements(v_rows) x
   where x ->> 'unique_key' is not null
  on conflict do nothing;
  -- deferred
  insert into svc_qs.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                               created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                               attempted_by, effective_max_attempts, limit_key)
  select j.id, j.state::text, j.run_at, j.queue, j.priority, j.kind, j.args, j.attempt, j.max_attempts, j.lease,
         j.created_at, j.errors, j.tags, j.metadata, j.unique_key, j.trace_context, j.claimed_at, j.attempted_at, j.attempted_by,
         j.effective_max_attempts, j.limit_key
    from jsonb_populate_recordset(null::jobs, v_rows) j where j.state in ('scheduled', 'retryable');
  -- parked
  insert into svc_qs.parked (job_id, lease, state, queue, priority, kind, args, attempt, max_attempts, run_at,
                             created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                             attempted_by, deadline_at, prefetched, effective_max_attempts, retry_delay_ms, limit_key,
                             waiter)
  select j.id, j.lease, 'waiting_external', j.queue, j.priority, j.kind, j.args, j.attempt, j.max_attempts,
         j.run_at, j.created_at, j.errors, j.tags, j.metadata, j.unique_key, j.trace_context, j.claimed_at, j.attempted_at,
         j.attempted_by, null, false, j.effective_max_attempts, j.retry_delay_ms, j.limit_key, 'http'
    from jsonb_populate_recordset(null::jobs, v_rows) j where j.state = 'waiting_external';
  -- ready, at the end of their lanes (in due-time and id order, as canonical would have claimed them)
  select jsonb_agg(x || jsonb_build_object('job_id', x -> 'id')) into v_ready
    from jsonb_array_elements(v_rows) x where x ->> 'state' = 'available';
  if v_ready is not null then
    perform svc_qs.back_to_lanes(v_ready);
  end if;
  delete from jobs where id = any(v_ids);
  return cardinality(v_ids);
end $$;

-- The leader's part of a mixed transition: canonical scheduled and retryable jobs, and parked HTTP
-- attempts, move to queue storage (available ones are drained in place by the workers). Returns how many.
create or replace function svc_qs.adopt_waiting(p_batch integer default 1000) returns integer
language plpgsql set search_path from current set jit = off as $$
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
    v_n := v_n + svc_qs.adopt(v_ids);
    exit when cardinality(v_ids) < p_batch;
  end loop;
  return v_n;
end $$;

-- Once per INSERT statement: while mixed (and after), the rows an older producer inserted into canonical's
-- jobs table move to queue storage at once, keeping their ids. A unique key already held in queue storage
-- raises unique_violation, as canonical's own index would.
create or replace function canonical_jobs_moved_statement() returns trigger
language plpgsql set search_path from current set jit = off as $$
declare
  v_taken text;
begin
  if (select transition from storage_state) in ('mixed_transition', 'active') then
    select n.unique_key into v_taken from moved_rows n
     where n.unique_key is not null and n.state in ('scheduled', 'available', 'retryable')
       and exists (select 1 from svc_qs.unique_keys k where k.unique_key = n.unique_key)
     limit 1;
    if v_taken is not null then
      raise exception 'duplicate key value violates unique constraint on the unique key %', v_taken
        using errcode = 'unique_violation';
    end if;
    perform svc_qs.adopt(array(select n.id from moved_rows n order by n.id));
  end if;
  return null;
end $$;

create or replace trigger jobs_moved_to_queue_storage after insert on jobs
  referencing new table as moved_rows
  for each statement execute function canonical_jobs_moved_statement();

create or replace function svc_qs.missing_objects() returns text[]
language sql stable set search_path from current as $$
  select coalesce(array_agg(n), '{}') from (
    select t as n from unnest(array['ring_rotations', 'lanes', 'ready', 'claims', 'completions', 'closed', 'skipped',
                                    'deferred', 'parked', 'unique_keys', 'callbacks', 'history', 'jobs']) t
     where to_regclass('svc_qs' || '.' || t) is null
    union all
    select f from unnest(array['claim', 'enqueue_jobs', 'close_attempts', 'complete', 'park', 'promote', 'rescue',
                               'prune', 'rotate', 'adopt', 'resolve_callback']) f
     where not exists (select 1 from pg_proc p join pg_namespace ns on ns.oid = p.pronamespace
                        where ns.nspname = 'svc_qs' and p.proname = f)) x
$$;

-- Queue-storage tables that hold job data (commented 'svc:job-data'), read from the catalog, that are
-- not empty.
create or replace function svc_qs.nonempty_job_tables() returns text[]
language plpgsql stable set search_path from current set jit = off as $$
declare
  r record;
  v text[] := '{}';
  v_any boolean;
begin
  for r in
    select c.oid::regclass::text as rel from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
     where ns.nspname = 'svc_qs' and c.relkind in ('r', 'p')
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
create or replace function storage_status(p_live_ms bigint default 90000) returns jsonb
language plpgsql stable set search_path from current set jit = off as $$
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
  v_missing := svc_qs.missing_objects();
  select coalesce(array_agg(id order by id) filter (where not ('queue_storage' = any(engines))), '{}'),
         coalesce(array_agg(id order by id) filter (where 'queue_storage' = any(engines)), '{}')
    into v_canon_only, v_capable
    from runtimes where heartbeat_at > now() - p_live_ms * interval '1 millisecond';
  if s.transition = 'canonical' then
    v_next := 'svc storage prepare';
    if cardinality(v_missing) > 0 then
      v_blockers := v_blockers || format('queue-storage objects missing: %s (run svc migrate)', array_to_string(v_missing, ', '));
    end if;
    if exists (select 1 from queue_limits where concurrency is not null) then
      v_blockers := v_blockers || format(
        'concurrency limits on %s, which the transition does not carry from one engine to the other: clear them first (svc queue limit NAME --clear) and set them again once the transition is finished',
        (select string_agg(queue, ', ' order by queue) from queue_limits where concurrency is not null));
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
    v_nonempty := svc_qs.nonempty_job_tables();
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
create or replace function storage_step(p_command text, p_live_ms bigint default 90000) returns jsonb
language plpgsql set search_path from current set jit = off as $$
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
      v_nonempty := svc_qs.nonempty_job_tables();
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

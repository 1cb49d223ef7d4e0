-- Queue storage: job reads and admin changes (get, list, cancel, retry, bulk).

create or replace function svc_qs.get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current set jit = off as $$
begin
  return (select job_json(to_jsonb(j)) from svc_qs.jobs j where j.id = p_id order by j.lease desc limit 1);
end $$;

-- A page of jobs, newest first: each place of a job (available, running, parked, deferred, finished)
-- is read newest first with the filter and the page size, and the pages are merged.
create or replace function svc_qs.list_jobs(p jsonb) returns jsonb language plpgsql stable set search_path from current set jit = off as $$
declare
  v_limit integer := page_limit(p);
  v_where text := job_filter_sql(p);
  v_rows jsonb[];
  v_sql text;
begin
  select string_agg(format('(select * from svc_qs.%I where %s order by id desc limit %s)', v, v_where, v_limit + 1),
                    ' union all ')
    into v_sql
    from unnest(array['jobs_available', 'jobs_running', 'jobs_parked', 'jobs_deferred', 'jobs_finished']) v;
  execute format('select coalesce(array_agg(to_jsonb(j) order by j.id desc), ''{}'') from (select * from (%s) u order by id desc limit %s) j',
                 v_sql, v_limit + 1)
    into v_rows;
  return job_page(v_rows, v_limit);
end $$;

-- Cancels a job that has not finished, wherever it is; raises job_not_found / invalid_state.
create or replace function svc_qs.cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
declare
  v_job jsonb;
  v_done boolean := false;
begin
  -- No lock of its own: each place a job can be in has its own exactly-once (the deferred row's lock, the
  -- lane position under the claim lock, the attempt under its claim batch's lock), so a cancel holds at
  -- most one of them and bulk changes beside single ones cannot deadlock.
  for i in 1 .. 5 loop
    v_job := svc_qs.get_job(p_id);
    if v_job is null then
      perform raise_api('job_not_found', format('job %s not found', p_id));
    end if;
    if v_job ->> 'state' in ('completed', 'failed', 'cancelled') then
      perform raise_api('invalid_state', format('job %s is %s: only a job that has not finished can be cancelled',
                                                p_id, v_job ->> 'state'));
    end if;
    if v_job ->> 'state' in ('scheduled', 'retryable') then
      with del as (delete from svc_qs.deferred d where d.job_id = p_id returning d.*),
      h as (
        insert into svc_qs.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                    max_attempts, effective_max_attempts, run_at, created_at, claimed_at, attempted_at,
                                    attempted_by, errors, tags, metadata, unique_key, trace_context, limit_key)
        select 'failed', now(), d.job_id, d.lease, 'cancelled', d.queue, d.priority, d.kind, d.args, d.attempt,
               d.max_attempts, d.effective_max_attempts, d.run_at, d.created_at, d.claimed_at, d.attempted_at, d.attempted_by,
               d.errors, d.tags, d.metadata, d.unique_key, d.trace_context, d.limit_key
          from del d returning unique_key, job_id),
      uk as (delete from svc_qs.unique_keys k using h where k.unique_key = h.unique_key and k.job_id = h.job_id)
      select count(*) > 0 into v_done from h;
    elsif v_job ->> 'state' = 'available' then
      -- Under the queue's claim lock (claims and cancels of its lanes take turns); the next statement sees a
      -- claim that committed while this one waited, and then inserts nothing.
      perform pg_advisory_xact_lock(svc_qs.claim_lock_key(v_job ->> 'queue'));
      with r as (
        select r.* from svc_qs.ready r
         where r.job_id = p_id and r.lease = (v_job ->> 'lease')::integer
           and r.seq > svc_qs.lane_cursor(r.queue, r.priority, r.shard)),
      tomb as (
        insert into svc_qs.skipped (slot, queue, priority, shard, seq, job_id)
        select r.slot, r.queue, r.priority, r.shard, r.seq, r.job_id from r
        on conflict do nothing returning slot, queue, priority, shard, seq),
      h as (
        insert into svc_qs.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                                    max_attempts, run_at, created_at, claimed_at, attempted_at, attempted_by, errors, tags,
                                    metadata, unique_key, trace_context, limit_key)
        select 'failed', now(), r.job_id, r.lease, 'cancelled', r.queue, r.priority, r.kind, r.args, r.attempt,
               r.max_attempts, r.run_at, r.created_at, r.claimed_at, r.attempted_at, r.attempted_by, r.errors, r.tags,
               r.metadata, r.unique_key, r.trace_context, r.limit_key
          from tomb join r using (slot, queue, priority, shard, seq) returning unique_key, job_id),
      uk as (delete from svc_qs.unique_keys k using h where k.unique_key = h.unique_key and k.job_id = h.job_id)
      select count(*) > 0 into v_done from h;
    else
      select count(*) > 0 into v_done
        from svc_qs.close_attempts(jsonb_build_array(jsonb_build_object(
               'ord', 0, 'id', p_id, 'lease', (v_job ->> 'lease')::integer, 'action', 'cancel')));
    end if;
    if v_done then
      return svc_qs.get_job(p_id);
    end if;
    -- It moved meanwhile (claimed, promoted, finished): look again.
  end loop;
  perform raise_api('invalid_state', format('job %s kept changing state; try again', p_id));
end $$;

-- Retries a finished job now: a new life at the end of its lane, attempt 0, errors kept.
create or replace function svc_qs.retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
declare
  v_job jsonb;
  v_shard smallint;
  v_slot smallint;
begin
  perform pg_advisory_xact_lock(hashtextextended('svc_qs' || ':job:' || p_id, 0));
  v_job := svc_qs.get_job(p_id);
  if v_job is null then
    perform raise_api('job_not_found', format('job %s not found', p_id));
  end if;
  if v_job ->> 'state' not in ('completed', 'failed', 'cancelled') then
    perform raise_api('invalid_state', format('job %s is %s: only a completed, failed or cancelled job can be retried',
                                              p_id, v_job ->> 'state'));
  end if;
  if v_job ->> 'unique_key' is not null then
    insert into svc_qs.unique_keys (unique_key, job_id) values (v_job ->> 'unique_key', p_id) on conflict do nothing;
    if not found then
      perform raise_api('unique_conflict', format('job %s cannot be retried: another unfinished job holds its unique key',
                                                  p_id));
    end if;
  end if;
  v_slot := svc_qs.write_slot();
  v_shard := svc_qs.lock_lane(v_job ->> 'queue', (v_job ->> 'priority')::smallint);
  insert into svc_qs.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease, run_at,
                            created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at, attempted_by,
                            limit_key)
  select v_slot, h.queue, h.priority, v_shard, nextval('svc_qs.ready_seq'), h.id, h.kind, h.args, 0,
         h.max_attempts, h.lease + 1, now(), h.created_at, h.errors, h.tags, h.metadata, h.unique_key,
         h.trace_context, h.claimed_at, h.attempted_at, h.attempted_by, h.limit_key
    from svc_qs.jobs_finished h where h.id = p_id order by h.lease desc limit 1;
  perform pg_notify(current_schema() || '_jobs', v_job ->> 'queue');
  return svc_qs.get_job(p_id);
end $$;

-- Cancels or retries every job matching p_filter (the REST bulk actions): one job at a time, each in the
-- locks of its own place; a job that finished or moved meanwhile is skipped. Cancels take the waiting
-- jobs first and then the running ones by ascending claim batch, so that the locks this transaction
-- collects follow the one lock order (claim locks, then claim batch locks ascending).
create or replace function svc_qs.bulk(p_filter jsonb, p_action text, p_dry_run boolean) returns bigint
language plpgsql set search_path from current set jit = off as $$
declare
  v_where text := job_filter_sql(p_filter - 'cursor' - 'q' - 'tag');
  v_sql text;
  v_id bigint;
  v_n bigint := 0;
begin
  if p_action = 'cancel' then
    v_sql := format(
      'select id from (select j.id, 0 as phase, 0::bigint as claim from svc_qs.jobs j
                        where %1$s and j.state::text in (''scheduled'', ''available'', ''waiting_external'', ''retryable'')
                          and j.id not in (select p.job_id from svc_qs.parked p where p.state = ''running'')
                       union all
                       select j.id, 1, coalesce((select a.claim_id from svc_qs.ring_attempt(j.id, j.lease) a), 0)
                         from svc_qs.jobs_running j where %1$s
                       union all
                       select j.id, 2, 0 from svc_qs.jobs_parked j where %1$s and j.state = ''running'') x
        order by phase, claim, id', v_where);
  else
    v_sql := format('select id from svc_qs.jobs where %s and state::text in (''completed'', ''failed'', ''cancelled'') order by id',
                    v_where);
  end if;
  if p_dry_run then
    execute format('select count(*) from (%s) x', v_sql) into v_n;
    return v_n;
  end if;
  for v_id in execute v_sql loop
    begin
      if p_action = 'cancel' then
        perform svc_qs.cancel_job(v_id);
      else
        perform svc_qs.retry_job(v_id);
      end if;
      v_n := v_n + 1;
    exception when sqlstate 'P0001' then
      null; -- it finished (or started again) meanwhile
    end;
  end loop;
  return v_n;
end $$;

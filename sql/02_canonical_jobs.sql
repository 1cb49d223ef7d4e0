-- The canonical engine's job reads and admin changes (one row per job in the jobs table).

-- Functions on the hot paths are plpgsql, not sql: a plpgsql statement's plan is kept across calls, a
-- SQL function's query is planned on every call (which cost more than running it, for the views).
create or replace function canonical_get_job(p_id bigint) returns jsonb language plpgsql stable set search_path from current set jit = off as $$
begin
  return (select job_json(to_jsonb(j)) from jobs j where j.id = p_id);
end $$;

create or replace function canonical_list_jobs(p jsonb) returns jsonb language plpgsql stable set search_path from current set jit = off as $$
declare
  v_limit integer := page_limit(p);
  v_rows jsonb[];
begin
  execute format('select coalesce(array_agg(to_jsonb(j) order by j.id desc), ''{}'') from (select * from jobs where %s order by id desc limit %s) j',
                 job_filter_sql(p), v_limit + 1)
    into v_rows;
  return job_page(v_rows, v_limit);
end $$;

create or replace function canonical_cancel_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
declare
  v jobs;
begin
  update jobs set state = 'cancelled', finalized_at = now(), heartbeat_at = null, deadline_at = null,
         attempted_at = case when state in ('running', 'waiting_external') then coalesce(attempted_at, claimed_at)
                             else attempted_at end
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

create or replace function canonical_retry_job(p_id bigint) returns jsonb language plpgsql set search_path from current set jit = off as $$
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

-- Queue storage: statistics (queue depths, kinds, throughput, finished attempts).

-- Dashboard figures. Counts are bounded: a count that reaches p_cap is a lower bound and its state is
-- listed in `approximate`. The age of the oldest available job comes from the next claimable row of
-- each lane. [{name, paused, counts, approximate, oldest_available_age_seconds}]
create or replace function svc_qs.queue_stats(p_cap integer) returns jsonb
language plpgsql stable set search_path from current set jit = off as $$
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
      from (select l.queue as name from svc_qs.lanes l union select qq.name from queues qq
            union select distinct d.queue from svc_qs.deferred d union select distinct p.queue from svc_qs.parked p) x
      left join queues qu on qu.name = x.name
     order by 1
  loop
    v_counts := '{}';
    v_approx := '{}';
    foreach st in array array['scheduled', 'available', 'running', 'waiting_external', 'retryable', 'completed',
                              'failed', 'cancelled'] loop
      v_from := case st
        when 'available' then 'svc_qs.jobs_available'
        when 'running' then '(select * from svc_qs.jobs_running union all select * from svc_qs.jobs_parked) j'
        when 'waiting_external' then 'svc_qs.jobs_parked'
        when 'scheduled' then 'svc_qs.jobs_deferred'
        when 'retryable' then 'svc_qs.jobs_deferred'
        else 'svc_qs.jobs_finished' end;
      execute format('select count(*) from (select 1 from %s where queue = $1 and state::text = $2 limit $3) c', v_from)
        into n using q.name, st, p_cap;
      v_counts := v_counts || jsonb_build_object(st, n);
      if n >= p_cap then
        v_approx := v_approx || st;
      end if;
    end loop;
    select extract(epoch from now() - min(f.run_at))::float8 into v_age
      from svc_qs.lanes l cross join lateral (
        select r.run_at from svc_qs.ready r
         where r.queue = l.queue and r.priority = l.priority and r.shard = l.shard
           and r.seq > svc_qs.lane_cursor(l.queue, l.priority, l.shard)
           and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                             and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)
         order by r.seq limit 1) f
     where l.queue = q.name;
    v_out := v_out || jsonb_build_array(jsonb_build_object(
      'name', q.name, 'paused', q.paused, 'counts', v_counts, 'approximate', to_jsonb(v_approx),
      'oldest_available_age_seconds', case when v_age is not null then greatest(v_age, 0) end));
  end loop;
  return v_out;
end $$;

-- Counts per kind and state over a sample of at most p_sample jobs (approximate when it is reached).
create or replace function svc_qs.kind_counts(p_sample integer) returns jsonb
language sql stable set search_path from current as $$
  with s as (select j.kind, j.state::text as state from svc_qs.jobs j limit p_sample),
       c as (select kind, state, count(*) as n from s group by 1, 2)
  select jsonb_build_object(
    'approximate', (select count(*) from s) >= p_sample,
    'kinds', coalesce((select jsonb_agg(jsonb_build_object('kind', k.kind, 'counts', k.counts) order by k.kind)
                         from (select kind, jsonb_object_agg(state, n) as counts from c group by kind) k), '[]'))
$$;

-- Completions and failures (for good) per minute over the last p_minutes minutes, oldest first.
create or replace function svc_qs.throughput(p_minutes integer) returns table (minute timestamptz, completed bigint, failed bigint)
language sql stable set search_path from current as $$
  with bounds as (select date_trunc('minute', now()) - (p_minutes - 1) * interval '1 minute' as since),
       fin as (
         select h.finalized_at as at, h.state, 1::bigint as n from svc_qs.history h, bounds
          where h.finalized_at >= bounds.since and h.state in ('completed', 'failed')
         union all
         select x.at, 'completed', cardinality(x.ids)::bigint from svc_qs.completions x, bounds where x.at >= bounds.since
         union all
         select c.at, 'completed', 1 from svc_qs.closed c, bounds where c.outcome = 'complete' and c.at >= bounds.since),
       done as (
         select date_trunc('minute', f.at) as minute,
                coalesce(sum(f.n) filter (where f.state = 'completed'), 0)::bigint as completed,
                coalesce(sum(f.n) filter (where f.state = 'failed'), 0)::bigint as failed
           from fin f group by 1)
  select m.minute, coalesce(d.completed, 0), coalesce(d.failed, 0)
    from bounds
         cross join generate_series(bounds.since, date_trunc('minute', now()), interval '1 minute') as m(minute)
         left join done d on d.minute = m.minute
   order by m.minute
$$;

create or replace function svc_qs.queue_depths(p_cap integer)
returns table (queue text, depth bigint, estimated boolean, oldest_available_age_seconds float8)
language sql stable set search_path from current set jit = off as $$
  select l.queue, sum(c.n)::bigint, bool_or(c.n >= l.share),
         greatest(extract(epoch from now() - min(c.oldest)), 0)::float8
    from (select x.*, greatest(1, p_cap / count(*) over (partition by x.queue))::integer as share
            from svc_qs.lanes x) l
    cross join lateral (select svc_qs.lane_cursor(l.queue, l.priority, l.shard) as seq) cur
    cross join lateral (
      select count(*) as n, min(a.run_at) as oldest from (
        select r.run_at from svc_qs.ready r
         where r.queue = l.queue and r.priority = l.priority and r.shard = l.shard and r.seq > cur.seq
           and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                             and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)
         order by r.seq limit l.share) a) c
   group by l.queue
  having sum(c.n) > 0
$$;

-- The attempts that finished in one minute: completions in the ring (their run time from the start the
-- worker reported), completions and failures in history, and failed ring attempts with no history row
-- (retried).
create or replace function svc_qs.finished_attempts(p_minute timestamptz)
returns table (queue text, kind text, outcome text, ms float8)
language sql stable set search_path from current set jit = off as $$
  with done as (
    select c.job_id, c.lease, c.slot, c.started_at, c.finalized_at from svc_qs.ring_completed c
     where c.finalized_at >= p_minute and c.finalized_at < p_minute + interval '1 minute'),
  fin as (
    select r.queue, r.kind, 'completed' as outcome,
           (extract(epoch from d.finalized_at - d.started_at) * 1000)::float8 as ms
      from done d join svc_qs.ready r on r.job_id = d.job_id and r.lease = d.lease - 1 and r.slot = d.slot
    union all
    select r.queue, r.kind, 'retried', null::float8
      from svc_qs.closed c join svc_qs.ready r on r.job_id = c.job_id and r.lease = c.lease - 1 and r.slot = c.slot
     where c.outcome = 'fail' and c.at >= p_minute and c.at < p_minute + interval '1 minute'
       and not exists (select 1 from svc_qs.history h where h.job_id = c.job_id and h.lease = c.lease)
    union all
    select h.queue, h.kind, h.state, (extract(epoch from h.finalized_at - h.attempted_at) * 1000)::float8
      from svc_qs.history h
     where h.finalized_at >= p_minute and h.finalized_at < p_minute + interval '1 minute'
       and h.state in ('completed', 'failed'))
  select f.queue, f.kind, f.outcome, f.ms from fin f
$$;

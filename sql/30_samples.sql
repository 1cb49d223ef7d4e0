-- Per-minute samples for the dashboard's charts and the Kinds page, and the one definition of a queue's
-- depth (docs/reference/metrics.md).

-- Creates the day partitions of both sample tables from yesterday to p_ahead days ahead (UTC), and drops the
-- partitions whose day ended more than p_keep_days ago. Returns the number of partitions dropped.
create or replace function ensure_sample_partitions(p_keep_days integer, p_ahead integer default 1) returns integer
language plpgsql set search_path from current set jit = off as $$
declare
  v_today date := (now() at time zone 'UTC')::date;
  d date;
  t text;
  r record;
  v_dropped integer := 0;
begin
  foreach t in array array['queue_samples', 'kind_samples'] loop
    for i in -1 .. p_ahead loop
      d := v_today + i;
      if to_regclass(format('%I.%I', current_schema(), t || '_' || to_char(d, 'YYYYMMDD'))) is null then
        execute format('create table %I.%I partition of %I.%I for values from (%L) to (%L)',
                       current_schema(), t || '_' || to_char(d, 'YYYYMMDD'), current_schema(), t,
                       d::timestamp at time zone 'UTC', (d + 1)::timestamp at time zone 'UTC');
      end if;
    end loop;
    for r in
      select c.relname from pg_inherits i
        join pg_class c on c.oid = i.inhrelid
        join pg_class p on p.oid = i.inhparent
        join pg_namespace ns on ns.oid = p.relnamespace
       where ns.nspname = current_schema() and p.relname = t and c.relname ~ ('^' || t || '_[0-9]{8}$')
    loop
      if to_date(right(r.relname, 8), 'YYYYMMDD') < v_today - p_keep_days then
        execute format('drop table %I.%I', current_schema(), r.relname);
        v_dropped := v_dropped + 1;
      end if;
    end loop;
  end loop;
  delete from samples_taken where minute < (v_today - p_keep_days)::timestamp at time zone 'UTC';
  return v_dropped;
end $$;

------------------------------------------------------------------------------------------------------
-- Depth: the one definition that the worker's gauges, the samples and the dashboard share.
------------------------------------------------------------------------------------------------------

-- Both return per queue with available jobs: depth, whether it is an estimate, and the age of the oldest
-- available job. JIT is off in these functions: the planner's cost of their per-lane probes crosses
-- jit_above_cost, and compiling took seconds where running takes milliseconds.

-- Canonical: the queues with available jobs (a skip scan of the claim index), each counted up to p_cap
-- rows of that index (estimated: the cap was reached, a lower bound), its oldest available job found by
-- one probe per priority.
create or replace function canonical_queue_depths(p_cap integer)
returns table (queue text, depth bigint, estimated boolean, oldest_available_age_seconds float8)
language sql stable set search_path from current set jit = off as $$
  with recursive qn(queue) as (
    (select j.queue from jobs j where j.state = 'available' order by j.queue limit 1)
    union all
    select (select j.queue from jobs j where j.state = 'available' and j.queue > qn.queue order by j.queue limit 1)
      from qn where qn.queue is not null)
  select qn.queue, c.n, c.n >= p_cap,
         greatest(extract(epoch from now() - o.oldest), 0)::float8
    from qn
    cross join lateral (
      select count(*) as n from (select 1 from jobs j where j.state = 'available' and j.queue = qn.queue
                                 limit p_cap) x) c
    cross join lateral (
      select min(f.run_at) as oldest from generate_series(1, 4) pr
       cross join lateral (select j.run_at from jobs j
                            where j.state = 'available' and j.queue = qn.queue and j.priority = pr::smallint
                            order by j.run_at limit 1) f) o
   where qn.queue is not null
$$;

------------------------------------------------------------------------------------------------------
-- The attempts that finished in one minute: (queue, kind, outcome completed | failed | retried, run time
-- in ms or null). The sampler adds them up per (queue, kind) (src/storage/shared/samples.ts).
------------------------------------------------------------------------------------------------------

-- Canonical: completed and failed jobs finalized in the minute (the finalized index), and the retries of
-- the minute found in the errors of jobs that wait for their retry or have finished since (a retried job
-- that is running again when the minute is sampled is not counted: an estimate).
create or replace function canonical_finished_attempts(p_minute timestamptz)
returns table (queue text, kind text, outcome text, ms float8)
language sql stable set search_path from current set jit = off as $$
  with fin as (
    select j.queue, j.kind, j.state::text as outcome,
           (extract(epoch from j.finalized_at - j.attempted_at) * 1000)::float8 as ms
      from jobs j
     where j.state in ('completed', 'failed') and j.finalized_at >= p_minute
       and j.finalized_at < p_minute + interval '1 minute'
    union all
    select j.queue, j.kind, 'retried', null::float8
      from jobs j cross join lateral jsonb_array_elements(j.errors) e
     where (j.state = 'retryable' or (j.state in ('completed', 'failed', 'cancelled') and j.finalized_at >= p_minute))
       and (e ->> 'at')::timestamptz >= p_minute and (e ->> 'at')::timestamptz < p_minute + interval '1 minute'
       and not coalesce((e ->> 'terminal')::boolean, false))
  select f.queue, f.kind, f.outcome, f.ms from fin f
$$;

-- Writes the samples of one minute once (p_queues: [{queue, depth, depth_estimated, age}], p_kinds: rows of
-- the sums of finished_attempts), creating its day partition when missing. Whether this call wrote them.
create or replace function record_samples(p_minute timestamptz, p_queues jsonb, p_kinds jsonb) returns boolean
language plpgsql set search_path from current set jit = off as $$
begin
  insert into samples_taken (minute) values (p_minute) on conflict do nothing;
  if not found then
    return false;
  end if;
  if to_regclass(format('%I.%I', current_schema(),
                        'queue_samples_' || to_char((p_minute at time zone 'UTC')::date, 'YYYYMMDD'))) is null then
    perform ensure_sample_partitions(7);
  end if;
  insert into queue_samples (minute, queue, depth, depth_estimated, oldest_available_age_seconds)
  select p_minute, x.queue, x.depth, coalesce(x.depth_estimated, false), x.age
    from jsonb_to_recordset(p_queues) as x(queue text, depth bigint, depth_estimated boolean, age float8);
  insert into kind_samples (minute, queue, kind, completed, failed, retried, run_p50_ms, run_p95_ms)
  select p_minute, x.queue, x.kind, sum(x.completed), sum(x.failed), sum(x.retried), max(x.run_p50_ms),
         max(x.run_p95_ms)
    from jsonb_to_recordset(p_kinds) as x(queue text, kind text, completed bigint, failed bigint, retried bigint,
                                          run_p50_ms float8, run_p95_ms float8)
   group by x.queue, x.kind;
  return true;
end $$;

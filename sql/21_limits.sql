-- Fleet-wide limits per queue (ADR 019): the limits row, its setter, and the budget a claim may take.
--
-- Every claim of a limited queue, on either engine, runs under the queue's claim lock
-- (svc_qs.claim_lock_key) and asks limit_budget how many jobs it may take; a claim of a rate-limited
-- queue that took jobs writes one limit_log row. Nothing is written when a job ends.

-- The open attempts of queue p_queue on the canonical engine, as a concurrency limit counts them: its running
-- jobs (held ones included) and its parked in-process waiters (their handler resumes without a claim), and
-- its HTTP parks when p_count_parked.
create or replace function canonical_open_attempts(p_queue text, p_count_parked boolean) returns bigint
language sql stable set search_path from current as $$
  select (select count(*) from jobs j where j.state = 'running' and j.queue = p_queue)
       + (select count(*) from jobs j join callbacks c on c.id = j.callback_id
           where j.state = 'waiting_external' and j.queue = p_queue and (c.kind <> 'http' or p_count_parked))
$$;

-- Queue storage: the open ring attempts of a queue with a concurrency limit, from its newest limit_open row
-- (every claim of the queue since the limit was set writes one, holding the open attempts after it): the
-- entries whose attempt has not ended, i.e. no completions row of its claim batch lists it and no closed row
-- holds it. An attempt (job, lease) never reopens, so an ended entry stays ended.
-- p_ended_ids/p_ended_leases (a claim's; none for other readers): attempts whose handler has returned in the
-- claiming worker, whose outcome is still on its way (ADR 019, "A returned handler holds no unit"): they are
-- not counted, and no lookup is made for them. An entry matches only with its lease, so a stale worker's list
-- ends nothing current. (A claim written for earlier workers, without the list, counts every entry.)
create or replace function svc_qs.limit_open_now(p_queue text, p_ended_ids bigint[] default '{}',
                                                 p_ended_leases integer[] default '{}')
returns table (job_id bigint, lease integer, slot smallint, claim_id bigint, limit_key text)
language plpgsql stable set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
begin
  return query
  select e.job_id, e.lease, e.slot, e.claim_id, e.limit_key
    from (select g.* from svc_qs.limit_open g where g.queue = p_queue order by g.claim_id desc limit 1) g
    cross join lateral unnest(g.job_ids, g.leases, g.slots, g.claim_ids, g.limit_keys)
      as e(job_id, lease, slot, claim_id, limit_key)
   where (cardinality(p_ended_ids) = 0
          or (p_ended_leases[array_position(p_ended_ids, e.job_id)] = e.lease) is not true)
   -- A point lookup per entry (the `(select true ... limit 1) is null` form keeps each a subplan: as NOT
   -- EXISTS the planner hashed every completions row of the ring against the entries; reading each batch's
   -- completions once, in a CTE, took twice as long for 50 entries).
     and (select true from svc_qs.completions x
           where x.claim_id = e.claim_id and x.slot = e.slot and e.job_id = any(x.ids) limit 1) is null
     and (select true from svc_qs.closed c where c.job_id = e.job_id and c.lease = e.lease and c.slot = e.slot
           limit 1) is null;
end $$;

-- Queue storage: the parked attempts of a queue that hold a concurrency unit: in-process waiters (their
-- handler resumes without a claim) and attempts moved out of the ring for running long, and HTTP parks when
-- the queue counts them (p_count_parked). Without p_count_parked the partial index on parked (queue) reads
-- only the rows that hold a unit, which the limit bounds.
create or replace function svc_qs.limit_parked_units(p_queue text, p_count_parked boolean) returns bigint
language plpgsql stable set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
begin
  -- PL/pgSQL, so the plans are cached (as a SQL function each call planned its statement: 0.15 ms)
  if p_count_parked then
    return (select count(*) from svc_qs.parked p where p.queue = p_queue);
  end if;
  return (select count(*) from svc_qs.parked p where p.queue = p_queue and p.waiter is distinct from 'http');
end $$;

-- Queue storage: every open ring attempt of a queue, read from its claims kept in the ring (each batch not
-- wholly completed, expanded to its ready rows): what a concurrency limit starts from when it is set. Reads
-- the queue's claims of the whole retention; it runs once, under the queue's claim lock, in the setter.
create or replace function svc_qs.limit_open_scan(p_queue text)
returns table (job_id bigint, lease integer, slot smallint, claim_id bigint, limit_key text)
language plpgsql stable set search_path from current set jit = off as $$
#variable_conflict use_column
begin
  return query
  select r.job_id, r.lease + 1, c.slot, c.claim_id, r.limit_key
    from svc_qs.claims c
    cross join lateral (
      select r.job_id, r.lease, r.limit_key from svc_qs.ready r
       where r.queue = c.queue and r.priority = c.priority and r.shard = c.shard and r.slot = c.slot
         and r.seq between c.first_seq and c.last_seq
         and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                           and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)) r
   where c.queue = p_queue
     and (select coalesce(sum(cardinality(x.ids)), 0) from svc_qs.completions x
           where x.claim_id = c.claim_id and x.slot = c.slot) < c.n
     and not svc_qs.attempt_closed(r.job_id, r.lease + 1, c.slot, c.claim_id);
end $$;

-- The open attempts of queue p_queue as a concurrency limit counts them, on the engine the database runs.
create or replace function limit_open_attempts(p_queue text, p_count_parked boolean) returns bigint
language plpgsql stable set search_path from current set jit = off as $$
begin
  if (select transition from storage_state) = 'active' then
    return (select count(*) from svc_qs.limit_open_now(p_queue)) + svc_qs.limit_parked_units(p_queue, p_count_parked);
  end if;
  return canonical_open_attempts(p_queue, p_count_parked);
end $$;

-- A queue's limits as every JSON surface shows them, with their use (in_use.rate: the jobs claimed in the
-- rate's current window); null when the queue has no limits row.
create or replace function queue_limit_json(l queue_limits) returns jsonb language sql stable set search_path from current as $$
  select case when l.queue is not null then jsonb_build_object(
    'concurrency', l.concurrency, 'rate', l.rate, 'per_ms', l.per_ms, 'per_key', l.per_key,
    'count_parked', l.count_parked,
    'rate_in_force_at', iso(l.rate_logged_since + l.per_ms * interval '1 millisecond'),
    'in_use', jsonb_build_object('rate', case when l.rate is not null then (
      select coalesce(sum(g.n), 0) from limit_log g
       where g.queue = l.queue and g.at > now() - l.per_ms * interval '1 millisecond') end,
      'concurrency', case when l.concurrency is not null then limit_open_attempts(l.queue, l.count_parked) end,
      'per_key', case when l.per_key is not null then (
        select coalesce(jsonb_object_agg(u.limit_key, u.n), '{}') from (
          select k.limit_key, count(*) as n from (
            select o.limit_key from svc_qs.limit_open_now(l.queue) o
            union all
            select p.limit_key from svc_qs.parked p
             where p.queue = l.queue and (l.count_parked or p.waiter is distinct from 'http')) k
           where k.limit_key is not null group by k.limit_key) u) end),
    'set_by', l.set_by, 'updated_at', iso(l.updated_at)) end
$$;

-- Sets the limits of queue p_queue from p_limit ({concurrency, rate, per_ms, per_key, count_parked}; a
-- missing or null field is no limit of that kind, so {} clears every limit but keeps the row, and no
-- worker seeds one again). p_seed: only when the queue has no row yet (a worker's option), returning the
-- row that stands. Raises 22023 naming a bad value. Runs under the queue's claim lock, so a claim sees
-- either the old limits or the new ones; the queue's workers are woken.
create or replace function set_queue_limit(p_queue text, p_limit jsonb, p_set_by text, p_seed boolean default false)
returns jsonb language plpgsql set search_path from current set jit = off as $$
declare
  v_old queue_limits;
  v_new queue_limits;
  v_int integer;
  v_state text;
  k text;
begin
  if p_queue is null or p_queue !~ '^[A-Za-z0-9_.-]{1,48}$' then
    raise exception 'svc.limit: queue name must be 1 to 48 characters of A-Z a-z 0-9 _ . -' using errcode = '22023';
  end if;
  if p_limit is null or jsonb_typeof(p_limit) <> 'object' then
    raise exception 'svc.limit: the limit must be a JSON object' using errcode = '22023';
  end if;
  for k in select jsonb_object_keys(p_limit) loop
    if k not in ('concurrency', 'rate', 'per_ms', 'per_key', 'count_parked') then
      raise exception 'svc.limit: unknown field %; the fields are concurrency, rate, per_ms, per_key, count_parked', k
        using errcode = '22023';
    end if;
    if k = 'count_parked' then
      if jsonb_typeof(p_limit -> k) not in ('boolean', 'null') then
        raise exception 'svc.limit: count_parked must be true or false' using errcode = '22023';
      end if;
      continue;
    end if;
    if jsonb_typeof(p_limit -> k) = 'null' then
      continue;
    end if;
    if jsonb_typeof(p_limit -> k) <> 'number' or (p_limit ->> k)::numeric <> trunc((p_limit ->> k)::numeric)
       or (p_limit ->> k)::numeric not between 1 and (case when k = 'per_ms' then 86400000 else 2147483647 end) then
      raise exception 'svc.limit: % must be an integer from 1 to %', k,
        case when k = 'per_ms' then '86400000 (24 hours)' else '2147483647' end using errcode = '22023';
    end if;
  end loop;
  if (p_limit ->> 'rate') is null <> ((p_limit ->> 'per_ms') is null) then
    raise exception 'svc.limit: rate and per_ms go together (at most rate claims in any window of per_ms)'
      using errcode = '22023';
  end if;

  perform pg_advisory_xact_lock(svc_qs.claim_lock_key(p_queue));
  -- A concurrency limit counts open attempts on one engine: canonical's jobs table, or queue storage's log of
  -- open attempts. Neither counts the other's, so a concurrency limit is refused while a storage transition
  -- is under way (and a transition refuses to begin while one is set).
  v_state := (select transition from storage_state for share);
  if (p_limit ->> 'concurrency') is not null and v_state not in ('canonical', 'active') then
    raise exception 'svc.limit: concurrency limits are not available while the storage transition is under way (%); set it once the transition is finished',
      v_state using errcode = '0A000';
  end if;
  -- Per-key limits divert jobs inside queue storage's claim: canonical has no such claim.
  if (p_limit ->> 'per_key') is not null and v_state <> 'active' then
    raise exception 'svc.limit: per-key limits need queue storage; this database runs the canonical engine (%): see svc storage prepare',
      v_state using errcode = '0A000';
  end if;
  select * into v_old from queue_limits where queue = p_queue;
  if found and p_seed then
    return queue_limit_json(v_old);
  end if;
  v_new.queue := p_queue;
  v_new.concurrency := (p_limit ->> 'concurrency')::integer;
  v_new.rate := (p_limit ->> 'rate')::integer;
  v_new.per_ms := (p_limit ->> 'per_ms')::integer;
  v_new.per_key := (p_limit ->> 'per_key')::integer;
  v_new.count_parked := coalesce((p_limit ->> 'count_parked')::boolean, false);
  -- The log holds every claim since the rate was added; a longer window than before is complete only as
  -- far back as the old window reached (the leader keeps each queue's rows for its window).
  v_new.rate_logged_since := case
    when v_new.rate is null then null
    when v_old.rate is null then now()
    else greatest(v_old.rate_logged_since, now() - v_old.per_ms * interval '1 millisecond') end;
  insert into queue_limits (queue, concurrency, rate, per_ms, per_key, count_parked, rate_logged_since, set_by,
                            updated_at)
  values (p_queue, v_new.concurrency, v_new.rate, v_new.per_ms, v_new.per_key, v_new.count_parked,
          v_new.rate_logged_since, coalesce(p_set_by, 'sql'), now())
  on conflict (queue) do update set
    concurrency = excluded.concurrency, rate = excluded.rate, per_ms = excluded.per_ms, per_key = excluded.per_key,
    count_parked = excluded.count_parked, rate_logged_since = excluded.rate_logged_since,
    set_by = excluded.set_by, updated_at = excluded.updated_at
  returning * into v_new;
  insert into queues (name, limited)
  values (p_queue, v_new.rate is not null or v_new.concurrency is not null or v_new.per_key is not null)
  on conflict (name) do update set limited = excluded.limited, updated_at = now();
  if v_new.rate is null then
    delete from limit_log where queue = p_queue;
  end if;
  -- Queue storage: a new concurrency limit starts from the queue's open attempts, read here under the claim
  -- lock (every later claim adds to the newest log row); without one, the log goes.
  if v_state = 'active' and v_new.concurrency is null and v_new.per_key is null then
    delete from svc_qs.limit_open where queue = p_queue;
  elsif v_state = 'active' and v_old.concurrency is null and v_old.per_key is null then
    insert into svc_qs.limit_open (queue, claim_id, at, job_ids, leases, slots, claim_ids, limit_keys)
    select p_queue, nextval('svc_qs.claim_seq'), now(), coalesce(array_agg(o.job_id), '{}'),
           coalesce(array_agg(o.lease), '{}'), coalesce(array_agg(o.slot), '{}'),
           coalesce(array_agg(o.claim_id), '{}'), coalesce(array_agg(o.limit_key), '{}')
      from svc_qs.limit_open_scan(p_queue) o;
  end if;
  perform pg_notify(current_schema() || '_jobs', p_queue);
  return queue_limit_json(v_new);
end $$;

-- Deletes the limits row of p_queue (a worker's option may seed one again); true when there was one.
create or replace function reset_queue_limit(p_queue text) returns boolean
language plpgsql set search_path from current set jit = off as $$
declare
  v_found boolean;
begin
  perform pg_advisory_xact_lock(svc_qs.claim_lock_key(p_queue));
  delete from queue_limits where queue = p_queue;
  v_found := found;
  update queues set limited = false, updated_at = now() where name = p_queue and limited;
  delete from limit_log where queue = p_queue;
  delete from svc_qs.limit_open where queue = p_queue;
  perform pg_notify(current_schema() || '_jobs', p_queue);
  return v_found;
end $$;

-- How many of p_want jobs a claim of queue p_queue may take now, and when it is cut short, why: throttled
-- names the limit ('rate' or 'concurrency'), in_use its use (claims in the current window; attempts open),
-- retry_at the earliest time a rate's window may have room again (when its oldest claim, or this one, leaves
-- it; null for concurrency: a unit frees when an attempt ends). log: the claim writes a limit_log row for
-- what it takes (a rate). limited: the queue has a limit (a canonical worker stops sending its claims here
-- when it has none). With p_lock it takes the queue's claim lock first (the canonical claim; queue
-- storage's claim holds it already); each statement below starts after the lock was granted, so it sees
-- every claim of the queue and every end of an attempt committed before.
drop function if exists limit_budget(text, integer, boolean);
create or replace function limit_budget(p_queue text, p_want integer, p_lock boolean default false,
                                        p_open bigint default null)
returns table (budget integer, throttled text, in_use integer, retry_at timestamptz, log boolean, limited boolean)
language plpgsql volatile set search_path from current set jit = off as $$
declare
  l queue_limits;
  v_used bigint;
  v_oldest timestamptz;
  v_budget integer := p_want;
  v_why text;
  v_in_use integer;
  v_retry timestamptz;
  v_open bigint;
begin
  if p_lock then
    perform pg_advisory_xact_lock(svc_qs.claim_lock_key(p_queue));
  end if;
  select * into l from queue_limits q where q.queue = p_queue;
  if not found or (l.rate is null and l.concurrency is null and l.per_key is null) then
    return query select p_want, null::text, null::integer, null::timestamptz, false, false;
    return;
  end if;
  -- Concurrency: p_open when the caller counted the open attempts (queue storage's claim, which also writes
  -- them to its log), else counted here.
  if l.concurrency is not null then
    v_open := coalesce(p_open, limit_open_attempts(p_queue, l.count_parked));
    if l.concurrency - v_open < v_budget then
      v_budget := greatest(l.concurrency - v_open, 0)::integer;
      v_why := 'concurrency';
      v_in_use := v_open::integer;
    end if;
  end if;
  -- Rate: counting since the rate was set, it is enforced once the log covers a whole window.
  if l.rate is not null and now() >= l.rate_logged_since + l.per_ms * interval '1 millisecond' then
    select coalesce(sum(g.n), 0), min(g.at) into v_used, v_oldest
      from limit_log g where g.queue = p_queue and g.at > now() - l.per_ms * interval '1 millisecond';
    if l.rate - v_used < v_budget then
      v_budget := greatest(l.rate - v_used, 0)::integer;
      v_why := 'rate';
      v_in_use := v_used::integer;
      v_retry := coalesce(v_oldest, now()) + l.per_ms * interval '1 millisecond';
    end if;
  end if;
  return query select v_budget, v_why, v_in_use, v_retry, l.rate is not null, true;
end $$;

-- The leader's duty: limit_log rows older than their queue's window (and every row of a queue that no
-- longer has a rate), and the limit_open rows that are not their queue's newest. Returns how many it deleted.
create or replace function prune_limit_log() returns bigint
language plpgsql set search_path from current set jit = off as $$
declare
  v_n bigint;
  v_m bigint;
begin
  delete from limit_log g
   where not exists (select 1 from queue_limits l
                      where l.queue = g.queue and l.rate is not null
                        and g.at > now() - l.per_ms * interval '1 millisecond' - interval '1 second');
  get diagnostics v_n = row_count;
  -- Queue storage's open-attempt log: every row of a queue but its newest (the only one a claim reads).
  delete from svc_qs.limit_open g
   where exists (select 1 from svc_qs.limit_open n where n.queue = g.queue and n.claim_id > g.claim_id);
  get diagnostics v_m = row_count;
  return v_n + v_m;
end $$;

-- The canonical claim of a limited queue, in one call (one round trip): the queue's claim lock and budget
-- (limit_budget), the claim of at most that many available jobs (the statement of the plain claim,
-- src/storage/canonical/claim.ts, with HTTP callbacks registered for the kinds in p_callbacks), and the
-- rate's log row. Returns each claimed job as JSON (its columns and `prefetched`), then, when a limit cut the
-- claim short, {throttled, in_use, retry_at}; {limited: false} when the queue has no limit any more.
create or replace function canonical_claim_limited(p_queue text, p_limit integer, p_worker text, p_policies jsonb,
                                                   p_free integer, p_ttl_ms bigint, p_callbacks jsonb)
returns setof jsonb language plpgsql set search_path from current set jit = off as $$
declare
  b record;
  v_n bigint := 0;
begin
  select * into b from limit_budget(p_queue, p_limit, true);
  if b.budget > 0 then
    return query
    with next as (
      select c.id, row_number() over (order by c.priority, c.run_at, c.id) as n from (
        select j.id, j.priority, j.run_at from jobs j
         where j.state = 'available' and j.queue = p_queue
           and not exists (select 1 from queues q where q.name = p_queue and q.paused)
         order by j.priority, j.run_at, j.id
         limit b.budget
         for update skip locked) c),
    claimed as (
      update jobs j
         set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1,
             claimed_at = now(), attempted_at = null, heartbeat_at = now(), attempted_by = p_worker,
             deadline_at = now() + (((p_policies -> j.kind ->> 'timeout_ms')::bigint
                                     + case when next.n > p_free then p_ttl_ms else 0 end) * interval '1 millisecond'),
             effective_max_attempts = least(j.max_attempts,
               coalesce((p_policies -> j.kind ->> 'max_attempts')::integer, j.max_attempts)),
             retry_delay_ms = coalesce(
               (p_policies -> j.kind -> 'delays_ms' ->> least(j.attempt,
                  jsonb_array_length(coalesce(p_policies -> j.kind -> 'delays_ms', '[null]')) - 1))::bigint,
               backoff_ms(j.attempt + 1)),
             callback_id = case when p_callbacks ? j.kind then gen_random_uuid() else j.callback_id end,
             callback_timeout_at = case when p_callbacks ? j.kind
               then now() + ((p_callbacks ->> j.kind)::bigint * interval '1 millisecond')
               else j.callback_timeout_at end
        from next where j.id = next.id
      returning j.*, next.n > p_free as prefetched),
    superseded as (
      update callbacks c set state = 'superseded', resolved_at = now()
       where c.state = 'pending' and c.job_id = any(array(select x.id from claimed x where p_callbacks ? x.kind))),
    registered as (
      insert into callbacks (id, job_id, attempt, lease, kind, deadline_at)
      select x.callback_id, x.id, x.attempt, x.lease, 'http', x.callback_timeout_at
        from claimed x where p_callbacks ? x.kind)
    select to_jsonb(x) from claimed x;
    get diagnostics v_n = row_count;
  end if;
  if v_n > 0 and b.log then
    insert into limit_log (queue, at, n) values (p_queue, now(), v_n);
  end if;
  if b.throttled is not null then
    return next jsonb_build_object('throttled', b.throttled, 'in_use', b.in_use + v_n, 'retry_at', b.retry_at);
  elsif not b.limited then
    return next jsonb_build_object('limited', false);
  end if;
end $$;

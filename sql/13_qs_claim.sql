-- Queue storage: the claim, the hot path's read (one claims row per lane shard and slot of the jobs taken).
--
-- The claim ids' epoch (ADR 021). A claim commits durably, but one can still be lost (a server run with
-- synchronous_commit = off, a failover to a standby that had not received it): its jobs are available again,
-- and the recovered claim_seq may hand its ids out again. Recovery after a crash empties the unlogged
-- claim_epoch (a promoted standby has it empty); the first claim afterwards comes here, under its own lock,
-- and moves claim_seq to the clock in microseconds, beyond every id given out before (claims take far fewer
-- than a million ids a second), so an outcome naming a lost claim matches no claim written since.
create or replace function svc_qs.start_claim_epoch() returns void
language plpgsql set search_path from current as $$
declare
  v_first bigint;
begin
  perform pg_advisory_xact_lock(hashtextextended('svc_qs' || ':claim_epoch', 0));
  -- A new statement: it sees the row of a claim that started the epoch while this one waited.
  if exists (select 1 from svc_qs.claim_epoch) then
    return;
  end if;
  v_first := greatest((select s.last_value from svc_qs.claim_seq s),
                      floor(extract(epoch from clock_timestamp()) * 1000000)::bigint);
  perform setval('svc_qs.claim_seq', v_first);
  insert into svc_qs.claim_epoch (first_claim) values (v_first + 1);
end $$;

-- Claims up to p_limit jobs of a queue for runtime p_worker, by priority and then lane position; the
-- first p_free go to free slots, the rest are held (prefetched). Each job's attempt is counted here.
-- p_policies: {kind: {max_attempts, timeout_ms, delays_ms}}; p_callbacks: {kind: callback timeout ms} for
-- HTTP workers, whose callbacks are registered here. Writes one claims row per lane shard and slot of
-- the jobs taken. Nothing while the queue is paused.
--
-- The candidates are read slot by slot: claim_candidates(slot, ...) has a branch per ring slot that names
-- that slot's partitions (ready_<slot>, claims_<slot>, skipped_<slot>) directly, so each branch's cached plan
-- touches three small tables and their indexes instead of the partitioned parents (a generic plan over the parents starts an
-- index scan per partition and locks every partition: 45 relation locks and half a millisecond of executor
-- start per claim, ADR 016 "What a claim costs"). Within a slot, every producer shard of a lane is read from
-- its cursor (the highest position claimed in that slot) in seq order; the claim merges the slots' candidates
-- by priority and seq and calls only the slots that hold rows, a test made in the same statement (so
-- with the same snapshot) as the reads, and that the caller has not found exhausted (p_skip, below). A cursor per slot takes the same rows as one
-- per lane: a lane shard's rows commit in seq order (producers hold its lock from nextval to commit) and
-- every claim merges all slots holding rows, so no unclaimed row lies below another slot's cursor (the
-- prune forwards unclaimed rows with their positions into the current slot, above every cursor).
-- The slot count is fixed when queue storage is installed (storage_state.qs_slots), so the block below
-- writes the branches for it.
do $gen$
declare
  v_shards integer := (select qs_shards from storage_state);
  v_slots integer := (select qs_slots from storage_state);
  v_lanes text := (select string_agg(format($lane$(select r.* from svc_qs.ready_%%1$s r
          where r.queue = p_queue and r.priority = p.priority and r.shard = %1$s
            and r.seq > coalesce((select c.last_seq from svc_qs.claims_%%1$s c
                                   where c.queue = p_queue and c.priority = p.priority and c.shard = %1$s
                                   order by c.last_seq desc limit 1), 0)
            -- a job cancelled while available: a point lookup per row, unless the slot has no skipped row at
            -- all (nearly always: one check per statement instead of a probe per row)
            and ((select true from svc_qs.skipped_%%1$s limit 1) is null
                 or (select true from svc_qs.skipped_%%1$s s
                      where s.queue = r.queue and s.priority = r.priority and s.shard = r.shard
                        and s.seq = r.seq limit 1) is null)
          order by r.seq limit p_limit)$lane$, s), E'\n        union all\n' order by s)
                     from generate_series(0, v_shards - 1) s);
  v_calls text := (select string_agg(format('select * from svc_qs.claim_candidates(%1$s::smallint, p_queue, v_prios, p_limit)
         where exists (select 1 from svc_qs.ready_%1$s) and not (%1$s = any(v_skip))', i),
                                     E'\n        union all\n' order by i)
                     from generate_series(0, v_slots - 1) i);
  -- The claim's statement: the candidates (/*ranked*/: ready rows with their rank in claim order, ordinality),
  -- numbered, one claims row per lane shard and slot; /*callbacks*/ is where the registration of HTTP callbacks
  -- goes (v_cbs) when the claim has HTTP kinds. No final sort: the rows come back as the numbered CTE holds
  -- them, which is claim order here, and the worker does not rely on it (it orders a claim's rows itself).
  v_body text := $body$  with numbered as materialized (
    select c.*, c.ordinality > p_free as pre, now() as claim_time, (select nextval('svc_qs.claim_seq')) as claim,
           now() + ((p_policies -> c.kind ->> 'timeout_ms')::bigint + v_ttl) * interval '1 millisecond' as deadline_at,
           least(c.max_attempts, coalesce((p_policies -> c.kind ->> 'max_attempts')::integer, c.max_attempts)) as eff,
           -- retry_delay_ms stays null: the worker does not read it, and a closer derives the delay from the
           -- claim's policies (claimed_jobs)
           null::bigint as retry_ms,
           case when p_callbacks ? c.kind then gen_random_uuid() end as cb_id,
           case when p_callbacks ? c.kind
                then now() + (p_callbacks ->> c.kind)::bigint * interval '1 millisecond' end as cb_deadline
      from /*ranked*/ c),
  ins as (
    insert into svc_qs.claims (slot, queue, priority, shard, first_seq, last_seq, claim_id, n, worker, at, policies,
                               ttl_ms, deadline_at)
    select n.slot, n.queue, n.priority, n.shard, min(n.seq), max(n.seq), min(n.claim), count(*), p_worker,
           min(n.claim_time), p_policies, v_ttl, min(n.deadline_at)
      from numbered n group by n.slot, n.queue, n.priority, n.shard)/*callbacks*//*units*/
  -- Every column on every row: workers of the previous release read them by name from each row (this
  -- release's worker takes the queue and the claim time once per claim, and reads the rows as arrays).
  select n.slot, n.queue, n.priority, n.shard, n.seq, n.job_id, n.kind, n.args, n.attempt + 1, n.max_attempts,
         n.lease + 1, n.run_at, n.created_at, n.errors, n.tags, n.metadata, n.unique_key, n.trace_context,
         n.claim_time, n.deadline_at, n.pre, n.eff, n.retry_ms, n.cb_id, n.cb_deadline, n.claim, n.limit_key,
         null::text, null::integer, null::timestamptz, null::integer
    from numbered n;$body$;
  -- The general claim: the candidates of every slot that may hold rows, merged by priority and position.
  v_stmt text := replace(v_body, '/*ranked*/', $ranked$(
           select c.*, row_number() over (order by c.priority, c.seq) as ordinality
             from (select r.* from (
                       /*slot candidates*/
                     ) r
                    order by r.priority, r.seq limit p_limit) c)$ranked$);
  -- The claim when one ring slot alone can hold the queue's rows (nearly always): that slot's candidates
  -- function read directly (it returns them in claim order), without the union over every slot, its merge
  -- sort and the window, whose executor start cost more than the reads (a third of a claim of 10: ADR 016).
  v_lean text := replace(v_body, '/*ranked*/', 'svc_qs.claim_candidates(v_live[1], p_queue, v_prios, p_limit) with ordinality');
  -- Which statement a claim runs: the lean one when one slot is live, with or without the callbacks insert.
  v_choose text := $choose$if cardinality(v_live) = 1 and p_callbacks = '{}'::jsonb then
      return query
      /*lean claims without callbacks*/
    elsif cardinality(v_live) = 1 then
      return query
      /*lean claims with callbacks*/
    elsif p_callbacks = '{}'::jsonb then
      return query
      /*claim without callbacks*/
    else
      return query
      /*claim with callbacks*/
    end if;$choose$;
  -- The keyed claim's candidates: the ready rows it chose, as it read them, in claim order (v_rows; a join with
  -- the partitioned parent would open and lock every partition at each claim).
  v_keyed text := replace(v_body, '/*ranked*/', 'unnest(v_rows) with ordinality');
  -- A claim of a queue that counts units (concurrency, per key) writes the next limit_open row in the same
  -- statement: the entries still open (v_oj ...) and the attempts it takes.
  v_units text := $units$,
  units as (
    insert into svc_qs.limit_open (queue, claim_id, at, job_ids, leases, slots, claim_ids, limit_keys)
    select p_queue, min(n.claim), now(), v_oj || array_agg(n.job_id), v_ol || array_agg(n.lease + 1),
           v_os || array_agg(n.slot), v_oc || array_agg(n.claim), v_ok || array_agg(n.limit_key)
      from numbered n having count(*) > 0)$units$;
  v_cbs text := $cbs$,
  cbs as (
    insert into svc_qs.callbacks (id, job_id, attempt, lease, kind, deadline_at)
    select n.cb_id, n.job_id, n.attempt + 1, n.lease + 1, 'http', n.cb_deadline
      from numbered n where n.cb_id is not null)$cbs$;
begin
  -- The candidates of slot p_slot, in claim order: a branch per slot, each reading that slot's partitions.
  execute replace($cand$
create or replace function svc_qs.claim_candidates(p_slot smallint, p_queue text, p_prios smallint[], p_limit integer)
returns setof svc_qs.ready
language plpgsql stable set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
begin
  /*slot branches*/
end $$
$cand$, '/*slot branches*/', (select string_agg(format($branch$%s p_slot = %s then
    return query
    select r.* from unnest(p_prios) p(priority)
    cross join lateral (
      select r.* from (
        %s
        ) r order by r.seq limit p_limit) r
    order by r.priority, r.seq limit p_limit;$branch$, case when i = 0 then 'if' else 'elsif' end, i,
                                                       format(v_lanes, i)), E'\n  ' order by i) || E'\n  end if;'
                                 from generate_series(0, v_slots - 1) i));
  execute replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace($fn$
create or replace function svc_qs.claim_next(p_queue text, p_limit integer, p_free integer, p_worker text,
                             p_policies jsonb, p_callbacks jsonb, p_prefetch_ttl_ms bigint, p_skip bigint[],
                             p_ended_ids bigint[] default '{}', p_ended_leases integer[] default '{}')
returns table (slot smallint, queue text, priority smallint, shard smallint, seq bigint, job_id bigint, kind text,
               args jsonb, attempt integer, max_attempts integer, lease integer, run_at timestamptz,
               created_at timestamptz, errors jsonb, tags text[], metadata jsonb, unique_key text,
               trace_context text, claimed_at timestamptz, deadline_at timestamptz, prefetched boolean,
               effective_max_attempts integer, retry_delay_ms bigint, callback_id uuid,
               callback_timeout_at timestamptz, claim_id bigint, limit_key text, throttled text, in_use integer,
               retry_at timestamptz, diverted integer)
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
  v_paused boolean;
  v_limited boolean;
  v_budget record;
  v_taken bigint;
  -- a concurrency limit: the queue's open ring attempts before this claim (ADR 019)
  v_conc integer;
  v_count_parked boolean;
  v_open bigint;
  v_oj bigint[];
  v_ol integer[];
  v_os smallint[];
  v_oc bigint[];
  v_ok text[];
  -- a per-key limit: the units each key holds, the candidates taken and the ones diverted (ADR 019)
  v_per_key integer;
  -- the units each key holds (v_kn[i] for key v_kk[i]), and the same with the room taken by jobs moved back
  v_kk text[];
  v_kn integer[];
  v_rk text[];
  v_rn integer[];
  v_i integer;
  v_want integer;
  v_n integer := 0;
  r record;
  rr svc_qs.ready;
  v_rows svc_qs.ready[] := '{}'; -- taken
  v_drows svc_qs.ready[] := '{}'; -- diverted
  v_back jsonb;
  v_slot smallint;
  v_prios smallint[] := array(select distinct l.priority from svc_qs.lanes l where l.queue = p_queue);
  -- The ring slots that can hold rows of the queue: those with a generation (a slot never rotated into holds
  -- nothing) whose newest generation is not one the worker found exhausted (p_skip).
  v_live smallint[];
  v_cands svc_qs.ready[];
  v_ttl bigint := case when p_limit > p_free then greatest(p_prefetch_ttl_ms, 0) else 0 end;
  -- The slots of the generations in p_skip (claim_exhausted found them with nothing left for this queue,
  -- for good) that still hold that generation: a slot reclaimed and written again since is read.
  v_skip smallint[] := case when cardinality(p_skip) > 0 then array(
      select r.slot from svc_qs.ring_rotations r
       where r.generation = any(p_skip)
         and not exists (select 1 from svc_qs.ring_rotations n where n.slot = r.slot and n.generation > r.generation))
    else '{}' end;
begin
  -- Claims of one queue take turns, and so does every other writer of a lane position (a cancel's
  -- skipped row, the prune's forwarding): claim ranges therefore never overlap.
  perform pg_advisory_xact_lock(svc_qs.claim_lock_key(p_queue));
  select q.paused, q.limited into v_paused, v_limited from queues q where q.name = p_queue;
  if v_paused then
    return;
  end if;
  -- The claim commits durably (ADR 021: committing it without the WAL flush let an attempt run twice after a
  -- server crash). Claim ids still start a new epoch after a crash, and outcomes name their claim.
  if not exists (select 1 from svc_qs.claim_epoch) then
    perform svc_qs.start_claim_epoch();
  end if;
  -- A limited queue (ADR 019): the claim takes at most what its limits leave, counted under the lock; when
  -- a limit cut it short, a last row without a job says which, its use and when to ask again.
  if v_limited then
    -- A concurrency limit counts the open attempts of the newest log row that have not ended, and the
    -- parked ones that hold a unit; this claim writes the next log row.
    select l.concurrency, l.count_parked, l.per_key into v_conc, v_count_parked, v_per_key
      from queue_limits l where l.queue = p_queue;
    if v_conc is not null or v_per_key is not null then
      select coalesce(array_agg(o.job_id), '{}'), coalesce(array_agg(o.lease), '{}'), coalesce(array_agg(o.slot), '{}'),
             coalesce(array_agg(o.claim_id), '{}'), coalesce(array_agg(o.limit_key), '{}')
        into v_oj, v_ol, v_os, v_oc, v_ok
        from svc_qs.limit_open_now(p_queue, p_ended_ids, p_ended_leases) o;
      v_open := cardinality(v_oj) + svc_qs.limit_parked_units(p_queue, v_count_parked);
      if v_per_key is not null then
        -- the units of each key: its open ring attempts and its parked attempts that hold one
        select coalesce(array_agg(k.limit_key), '{}'), coalesce(array_agg(k.n), '{}') into v_kk, v_kn from (
          select u.limit_key, count(*)::integer as n from (
            select unnest(v_ok) as limit_key
            union all
            select p.limit_key from svc_qs.parked p
             where p.queue = p_queue and p.limit_key is not null
               and (v_count_parked or p.waiter is distinct from 'http')) u
           where u.limit_key is not null group by u.limit_key) k;
      end if;
    end if;
    select * into v_budget from limit_budget(p_queue, p_limit, false, v_open);
    if v_budget.budget < p_limit then
      p_limit := v_budget.budget;
      p_free := least(p_free, p_limit);
      v_ttl := case when p_limit > p_free then greatest(p_prefetch_ttl_ms, 0) else 0 end;
    end if;
    if p_limit <= 0 then
      return query select null::smallint, null::text, null::smallint, null::smallint, null::bigint, null::bigint,
        null::text, null::jsonb, null::integer, null::integer, null::integer, null::timestamptz, null::timestamptz,
        null::jsonb, null::text[], null::jsonb, null::text, null::text, null::timestamptz, null::timestamptz,
        null::boolean, null::integer, null::bigint, null::uuid, null::timestamptz, null::bigint, null::text,
        v_budget.throttled, v_budget.in_use, v_budget.retry_at, 0;
      return;
    end if;
  end if;
  -- Per priority, the shards of the lane are read from their cursors (the highest claimed position) in
  -- seq order and merged, so that only the rows claimed are read; every lookup is an index probe.
  -- Without HTTP kinds the statement leaves out the callbacks insert, whose executor start (the table and its
  -- three indexes opened) every claim paid.
  v_live := array(select g.slot from (
                    select s::smallint as slot,
                           (select max(r.generation) from svc_qs.ring_rotations r where r.slot = s) as gen
                      from generate_series(0, /*last slot*/) s) g
                   where g.gen is not null and not (g.gen = any(p_skip)));
  if v_per_key is not null then
    -- Per key (ADR 019). Jobs moved aside earlier (or scheduled, keyed and due) whose key has room now are
    -- taken first, in this claim: written as ready rows into the queue's claim lane (shard -1 of their
    -- priority's lane, which only claims write, under this lock, and which they take whole: its cursor is always
    -- at its end, so its rows are never candidates) and claimed with the rest. Taken at once, a job moved aside
    -- is moved aside at most once while keys free up (put back at the end of its lane, as before, it met its
    -- key busy again about as often as the first time). At most the room of each key, and of the claim.
    v_rk := v_kk;
    v_rn := v_kn;
    v_back := '[]';
    for r in select x.job_id, x.limit_key from svc_qs.deferred x
              where x.queue = p_queue and x.limit_key is not null and x.run_at <= now()
              order by x.run_at, x.job_id limit 4 * p_limit loop
      exit when jsonb_array_length(v_back) >= p_limit;
      v_i := array_position(v_rk, r.limit_key);
      if v_i is null then
        v_back := v_back || to_jsonb(r.job_id);
        v_rk := v_rk || r.limit_key;
        v_rn := v_rn || 1;
      elsif v_rn[v_i] < v_per_key then
        v_back := v_back || to_jsonb(r.job_id);
        v_rn[v_i] := v_rn[v_i] + 1;
      end if;
    end loop;
    if jsonb_array_length(v_back) > 0 then
      v_slot := svc_qs.write_slot();
      -- The rows were read without a lock (locking every row the loop looked at wrote one WAL record each
      -- per claim): one that went meanwhile (promoted, cancelled) is not deleted and not taken, and the
      -- delete checks again that the row it finds is due and keyed.
      with del as (delete from svc_qs.deferred d
                    where d.job_id in (select (jsonb_array_elements_text(v_back))::bigint)
                      and d.queue = p_queue and d.limit_key is not null and d.run_at <= now()
                    returning d.*),
      ins as (insert into svc_qs.ready as b (slot, queue, priority, shard, seq, job_id, kind, args, attempt,
                                            max_attempts, lease, run_at, created_at, errors, tags, metadata,
                                            unique_key, trace_context, claimed_at, attempted_at, attempted_by,
                                            limit_key)
              select v_slot, d.queue, d.priority, -1, nextval('svc_qs.ready_seq'), d.job_id, d.kind, d.args, d.attempt,
                     d.max_attempts, d.lease, d.run_at, d.created_at, d.errors, d.tags, d.metadata, d.unique_key,
                     d.trace_context, d.claimed_at, d.attempted_at, d.attempted_by, d.limit_key
                from (select * from del order by del.priority, del.run_at, del.job_id) d
              returning b)
      select coalesce(array_agg(ins.b order by (ins.b).priority, (ins.b).seq), '{}') into v_rows from ins;
      v_n := cardinality(v_rows);
      v_kk := v_rk;
      v_kn := v_rn;
    end if;
    -- Then the candidates the claim would read (twice what it may still take, more while many keys hold all
    -- their units, at most four times), in claim order; a job whose key holds all its units is diverted: a
    -- skipped row at its position (as a cancel writes) and a scheduled copy, due now, which a later claim
    -- takes once its key has room (or the leader's promotion puts back at the end of its lane). The claim
    -- takes the rest, so the lane's cursor moves past both and one busy key does not hold the lane.
    v_want := least(4 * (p_limit - v_n),
                    (p_limit - v_n) + greatest(p_limit - v_n,
                                               (select count(*) from unnest(v_kn) n where n >= v_per_key)::integer));
    if v_want <= 0 then
      v_cands := '{}';
    elsif cardinality(v_live) = 1 then
      v_cands := array(select c from svc_qs.claim_candidates(v_live[1], p_queue, v_prios, v_want) c);
    else
      v_cands := array(select c::svc_qs.ready from (/*slot candidates wanted*/) c order by c.priority, c.seq
                        limit v_want);
    end if;
    foreach rr in array v_cands loop
      exit when v_n >= p_limit;
      v_i := case when rr.limit_key is not null then array_position(v_kk, rr.limit_key) end;
      if v_i is not null and v_kn[v_i] >= v_per_key then
        v_drows := v_drows || rr;
      else
        v_rows := v_rows || rr;
        v_n := v_n + 1;
        if v_i is not null then
          v_kn[v_i] := v_kn[v_i] + 1;
        elsif rr.limit_key is not null then
          v_kk := v_kk || rr.limit_key;
          v_kn := v_kn || 1;
        end if;
      end if;
    end loop;
    if cardinality(v_drows) > 0 then
      insert into svc_qs.deferred (job_id, state, run_at, queue, priority, kind, args, attempt, max_attempts, lease,
                                   created_at, errors, tags, metadata, unique_key, trace_context, claimed_at,
                                   attempted_at, attempted_by, effective_max_attempts, limit_key)
      -- the position's lease is used up by its skipped row (a job's ready rows each have a lease of their own)
      select x.job_id, 'scheduled', now(), x.queue, x.priority, x.kind, x.args, x.attempt, x.max_attempts, x.lease + 1,
             x.created_at, x.errors, x.tags, x.metadata, x.unique_key, x.trace_context, x.claimed_at, x.attempted_at,
             x.attempted_by, null, x.limit_key
        from unnest(v_drows) x;
      insert into svc_qs.skipped (slot, queue, priority, shard, seq, job_id)
      select x.slot, x.queue, x.priority, x.shard, x.seq, x.job_id from unnest(v_drows) x;
    end if;
    if v_n > 0 and p_callbacks = '{}'::jsonb then
      return query
      /*keyed claim without callbacks*/
    elsif v_n > 0 then
      return query
      /*keyed claim with callbacks*/
    end if;
  elsif v_conc is not null then
    /*choose units claim*/
  else
    /*choose claim*/
  end if;
  if v_limited then
    get diagnostics v_taken = row_count;
    if v_per_key is not null and v_n = 0 then
      v_taken := 0; -- the keyed claim took nothing: the count above is its last insert's
    end if;
    if v_taken > 0 and v_budget.log then
      insert into limit_log (queue, at, n) values (p_queue, now(), v_taken);
    end if;
    if v_budget.throttled is not null then
      return query select null::smallint, null::text, null::smallint, null::smallint, null::bigint, null::bigint,
        null::text, null::jsonb, null::integer, null::integer, null::integer, null::timestamptz, null::timestamptz,
        null::jsonb, null::text[], null::jsonb, null::text, null::text, null::timestamptz, null::timestamptz,
        null::boolean, null::integer, null::bigint, null::uuid, null::timestamptz, null::bigint, null::text,
        v_budget.throttled, (v_budget.in_use + v_taken)::integer, v_budget.retry_at, cardinality(v_drows);
    elsif v_per_key is not null and v_taken < p_limit and cardinality(v_drows) > 0 then
      -- keys at their limit cut the claim short
      return query select null::smallint, null::text, null::smallint, null::smallint, null::bigint, null::bigint,
        null::text, null::jsonb, null::integer, null::integer, null::integer, null::timestamptz, null::timestamptz,
        null::jsonb, null::text[], null::jsonb, null::text, null::text, null::timestamptz, null::timestamptz,
        null::boolean, null::integer, null::bigint, null::uuid, null::timestamptz, null::bigint, null::text,
        'per_key'::text, null::integer, null::timestamptz, cardinality(v_drows);
    elsif v_conc is not null or v_per_key is not null then
      -- not cut short: a last row without a job and without a limit tells the worker that the queue counts
      -- units, so that it sends the attempts whose handler has returned with its next claims
      return query select null::smallint, null::text, null::smallint, null::smallint, null::bigint, null::bigint,
        null::text, null::jsonb, null::integer, null::integer, null::integer, null::timestamptz, null::timestamptz,
        null::jsonb, null::text[], null::jsonb, null::text, null::text, null::timestamptz, null::timestamptz,
        null::boolean, null::integer, null::bigint, null::uuid, null::timestamptz, null::bigint, null::text,
        null::text, (v_open + v_taken)::integer, null::timestamptz, cardinality(v_drows);
    end if;
  end if;
end $$
$fn$, '/*choose units claim*/', replace(replace(v_choose, '/*lean claims', '/*lean units claims'), '/*claim with', '/*units claim with')),
       '/*choose claim*/', v_choose),
       '/*claim without callbacks*/', replace(replace(v_stmt, '/*callbacks*/', ''), '/*units*/', '')),
       '/*claim with callbacks*/', replace(replace(v_stmt, '/*callbacks*/', v_cbs), '/*units*/', '')),
       '/*units claim without callbacks*/', replace(replace(v_stmt, '/*callbacks*/', ''), '/*units*/', v_units)),
       '/*units claim with callbacks*/', replace(replace(v_stmt, '/*callbacks*/', v_cbs), '/*units*/', v_units)),
       '/*slot candidates*/', v_calls),
       '/*slot candidates wanted*/', replace(v_calls, 'v_prios, p_limit)', 'v_prios, v_want)')),
       '/*keyed claim without callbacks*/', replace(replace(v_keyed, '/*callbacks*/', ''), '/*units*/', v_units)),
       '/*keyed claim with callbacks*/', replace(replace(v_keyed, '/*callbacks*/', v_cbs), '/*units*/', v_units)),
       '/*lean claims without callbacks*/', replace(replace(v_lean, '/*callbacks*/', ''), '/*units*/', '')),
       '/*lean claims with callbacks*/', replace(replace(v_lean, '/*callbacks*/', v_cbs), '/*units*/', '')),
       '/*lean units claims without callbacks*/', replace(replace(v_lean, '/*callbacks*/', ''), '/*units*/', v_units)),
       '/*lean units claims with callbacks*/', replace(replace(v_lean, '/*callbacks*/', v_cbs), '/*units*/', v_units)),
       '/*last slot*/', (v_slots - 1)::text);
end $gen$;

-- The claim of earlier versions (no throttled row): a worker of the previous version obeys the same limits
-- and only polls where a new one would wait for the throttled row's retry_at.
create or replace function svc_qs.claim(p_queue text, p_limit integer, p_free integer, p_worker text, p_policies jsonb,
                             p_callbacks jsonb, p_prefetch_ttl_ms bigint, p_skip bigint[])
returns table (slot smallint, queue text, priority smallint, shard smallint, seq bigint, job_id bigint, kind text,
               args jsonb, attempt integer, max_attempts integer, lease integer, run_at timestamptz,
               created_at timestamptz, errors jsonb, tags text[], metadata jsonb, unique_key text,
               trace_context text, claimed_at timestamptz, deadline_at timestamptz, prefetched boolean,
               effective_max_attempts integer, retry_delay_ms bigint, callback_id uuid,
               callback_timeout_at timestamptz, claim_id bigint, limit_key text)
language plpgsql set search_path from current set jit = off as $$
begin
  return query select c.slot, c.queue, c.priority, c.shard, c.seq, c.job_id, c.kind, c.args, c.attempt,
                      c.max_attempts, c.lease, c.run_at, c.created_at, c.errors, c.tags, c.metadata, c.unique_key,
                      c.trace_context, c.claimed_at, c.deadline_at, c.prefetched, c.effective_max_attempts,
                      c.retry_delay_ms, c.callback_id, c.callback_timeout_at, c.claim_id, c.limit_key
                 from svc_qs.claim_next(p_queue, p_limit, p_free, p_worker, p_policies, p_callbacks,
                                        p_prefetch_ttl_ms, p_skip) c
                where c.job_id is not null;
end $$;

-- The claim without a list of generations to skip: the signature of earlier versions, kept for workers that
-- still call it during a rolling upgrade.
create or replace function svc_qs.claim(p_queue text, p_limit integer, p_free integer, p_worker text, p_policies jsonb,
                             p_callbacks jsonb, p_prefetch_ttl_ms bigint)
returns table (slot smallint, queue text, priority smallint, shard smallint, seq bigint, job_id bigint, kind text,
               args jsonb, attempt integer, max_attempts integer, lease integer, run_at timestamptz,
               created_at timestamptz, errors jsonb, tags text[], metadata jsonb, unique_key text,
               trace_context text, claimed_at timestamptz, deadline_at timestamptz, prefetched boolean,
               effective_max_attempts integer, retry_delay_ms bigint, callback_id uuid,
               callback_timeout_at timestamptz, claim_id bigint, limit_key text)
language plpgsql set search_path from current set jit = off as $$
begin
  return query select * from svc_qs.claim(p_queue, p_limit, p_free, p_worker, p_policies, p_callbacks,
                                          p_prefetch_ttl_ms, '{}'::bigint[]);
end $$;

-- The sealed generations in whose slot queue p_queue has nothing left to claim, and never will: a worker
-- passes them to its claims (p_skip), so that a claim reads the slots that can still hold work instead of
-- every slot kept for the completed retention (with a long retention, or while a long transaction keeps
-- slots from being reclaimed, that is all of them). A generation qualifies when
-- 1. the ring's position has moved past it, so no producer picks its slot any more (write_slot);
-- 2. no producer that picked it before is still writing: its lock can be taken exclusively (try only; it is
--    held to the end of this statement's transaction, so a producer that read the position just before
--    waits, reads it again and moves on to the new generation);
-- 3. then, in a later statement (whose snapshot sees every row those producers committed), its slot holds
--    no row of the queue above its lane shards' cursors that is not skipped.
-- Nothing adds rows to such a slot afterwards (new rows, promotions, retries, give-backs and forwarded rows
-- go to the position's slot), so the answer holds until the slot is reclaimed; the claim then sees that the
-- slot holds a newer generation.
create or replace function svc_qs.claim_exhausted(p_queue text) returns bigint[]
language plpgsql volatile set search_path from current set jit = off as $$
declare
  v_prios smallint[] := array(select distinct l.priority from svc_qs.lanes l where l.queue = p_queue);
  v_pos bigint := (select last_value from svc_qs.ring_position) / 1000;
  v_drained bigint[] := '{}';
  v_slots smallint[] := '{}';
  v_out bigint[] := '{}';
  v_any boolean;
  r record;
begin
  for r in select distinct on (g.slot) g.slot, g.generation from svc_qs.ring_rotations g
            order by g.slot, g.generation desc loop
    if r.generation < v_pos and pg_try_advisory_xact_lock(svc_qs.generation_lock_key(r.generation)) then
      v_drained := v_drained || r.generation;
      v_slots := v_slots || r.slot;
    end if;
  end loop;
  for i in 1 .. cardinality(v_drained) loop
    v_any := exists (select 1 from svc_qs.claim_candidates(v_slots[i], p_queue, v_prios, 1));
    if not v_any then
      v_out := v_out || v_drained[i];
    end if;
  end loop;
  return v_out;
end $$;

-- Queue storage: completions, the hot path (one completions row per claim batch and slot).

-- The writes of one slot: a function per ring slot (complete_rows_<slot>, and complete_in_slot_<slot> that
-- reads the JSON form of complete()) names that slot's partitions
-- (claims_<slot>, closed_<slot>, completions_<slot>) directly, so its cached plan probes three small tables
-- instead of starting an index scan in every partition of the parents for each item (as the claim does,
-- 13_qs_claim.sql). The slot count is fixed when queue storage is installed; the block below writes them.
do $gen$
declare
  v_slots integer := (select qs_slots from storage_state);
  v_calls text := (select string_agg(format('when %1$s then svc_qs.complete_in_slot_%1$s(p_items)', i), ' ' order by i)
                     from generate_series(0, v_slots - 1) i);
  v_row_calls text := (select string_agg(format('when %1$s then svc_qs.complete_rows_%1$s(p_ids, p_leases, p_slots,
                                                   p_claims, p_started_ms, p_results)', i), ' ' order by i)
                         from generate_series(0, v_slots - 1) i);
begin
  for i in 0 .. v_slots - 1 loop
    execute format($slot$
create or replace function svc_qs.complete_in_slot_%1$s(p_items jsonb) returns bigint[]
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
begin
  -- The JSON form of complete_rows_%1$s (below), for complete().
  return (select svc_qs.complete_rows_%1$s(array_agg(i.id), array_agg(i.lease), array_agg(i.slot),
                                           array_agg(i.claim),
                                           array_agg((extract(epoch from i.started_at) * 1000)::bigint),
                                           array_agg(i.result))
            from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint, claim bigint,
                                                  started_at timestamptz, result jsonb));
end $$
$slot$, i);
    execute format($slot$
create or replace function svc_qs.complete_rows_%1$s(p_ids bigint[], p_leases integer[], p_slots smallint[],
                                                     p_claims bigint[], p_started_ms bigint[], p_results jsonb[])
returns bigint[]
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_done bigint[];
begin
  with ins as (
    insert into svc_qs.completions_%1$s (slot, claim_id, ids, leases, started_at, results)
    select %1$s, i.claim, array_agg(i.id), array_agg(i.lease),
           array_agg(coalesce(to_timestamp(i.started_ms / 1000.0), now())), array_agg(i.result)
      from unnest(p_ids, p_leases, p_slots, p_claims, p_started_ms, p_results)
             as i(id, lease, slot, claim, started_ms, result)
     where i.claim is not null and i.slot = %1$s
       and (select true from svc_qs.claims_%1$s c where c.claim_id = i.claim limit 1)
       and (select true from svc_qs.closed_%1$s c where c.job_id = i.id and c.lease = i.lease limit 1) is null
       and (select true from svc_qs.completions_%1$s x where x.claim_id = i.claim and i.id = any(x.ids)
             limit 1) is null
     group by i.claim
    returning ids)
  select coalesce(array_agg(u), '{}') into v_done from ins, unnest(ins.ids) u;
  return v_done;
end $$
$slot$, i);
  end loop;
  execute replace($fn$
-- Completions, the hot path: items {id, lease, slot, claim, started_at, result[, unique_key]} of attempts
-- this worker claimed. Under the claim batches' locks (ascending), a new statement keeps the attempts no
-- closer ended and writes them as one completions row per claim and slot. Items it cannot complete here
-- (no claim given, moved out of the ring) go through close_attempts. A caller in a REPEATABLE READ or
-- SERIALIZABLE transaction (whose snapshot predates the lock) completes through close_attempts, whose
-- per-attempt rows have the unique backstop. Returns the ids completed.
create or replace function svc_qs.complete(p_items jsonb, p_keep boolean) returns setof bigint
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_done bigint[] := '{}';
  v_rest jsonb;
  v_keys jsonb;
  v_slot smallint;
begin
  if current_setting('transaction_isolation') = 'read committed' then
    perform pg_advisory_xact_lock(svc_qs.batch_lock_key(b.claim))
       from (select distinct (x ->> 'claim')::bigint as claim from jsonb_array_elements(p_items) x
              where x ->> 'claim' is not null order by 1) b;
    -- One call per ring slot of the items (nearly always one), to that slot's own function.
    for v_slot in
      select distinct (x ->> 'slot')::smallint from jsonb_array_elements(p_items) x
       where x ->> 'claim' is not null and x ->> 'slot' is not null
    loop
      v_done := v_done || case v_slot /*slot calls*/ else '{}'::bigint[] end;
    end loop;
    if cardinality(v_done) > 0 then
      select jsonb_object_agg(x ->> 'id', x ->> 'unique_key') into v_keys
        from jsonb_array_elements(p_items) x where x ->> 'unique_key' is not null;
      if v_keys is not null then
        delete from svc_qs.unique_keys k
         where k.unique_key in (select v_keys ->> d::text from unnest(v_done) d where v_keys ? d::text)
           and k.job_id = any(v_done);
      end if;
    end if;
    return query select unnest(v_done);
  end if;
  if cardinality(v_done) < jsonb_array_length(p_items) then
    select jsonb_agg(x || jsonb_build_object('ord', o - 1, 'action', 'complete', 'keep', p_keep))
      into v_rest
      from jsonb_array_elements(p_items) with ordinality as e(x, o)
     where not ((x ->> 'id')::bigint = any(v_done));
    return query select c.job_id from svc_qs.close_attempts(v_rest) c;
  end if;
end $$;
$fn$, '/*slot calls*/', v_calls);
  execute replace($fn$
-- The hot path's completions as arrays, one element per attempt (slots and claims null when the worker did
-- not claim the attempt; started_ms: the handler's start, epoch milliseconds; unique_keys: the job's key or
-- null): the same as complete() without reading a JSON document per attempt, which took about half of a
-- 250-job completion's parse and lookup time. Returns the ids completed.
create or replace function svc_qs.complete_many(p_ids bigint[], p_leases integer[], p_slots smallint[],
                                                p_claims bigint[], p_started_ms bigint[], p_results jsonb[],
                                                p_unique_keys text[], p_keep boolean)
returns setof bigint
language plpgsql set search_path from current set jit = off set plan_cache_mode = force_generic_plan as $$
declare
  v_done bigint[] := '{}';
  v_rest jsonb;
  v_slot smallint;
begin
  if current_setting('transaction_isolation') = 'read committed' then
    perform pg_advisory_xact_lock(svc_qs.batch_lock_key(b.claim))
       from (select distinct c as claim from unnest(p_claims) c where c is not null order by 1) b;
    for v_slot in
      select distinct x.slot from unnest(p_slots, p_claims) as x(slot, claim)
       where x.claim is not null and x.slot is not null
    loop
      v_done := v_done || case v_slot /*slot calls*/ else '{}'::bigint[] end;
    end loop;
    if cardinality(v_done) > 0 and exists (select 1 from unnest(p_unique_keys) k where k is not null) then
      delete from svc_qs.unique_keys k
       using unnest(p_ids, p_unique_keys) as u(id, unique_key)
       where u.unique_key is not null and k.unique_key = u.unique_key and k.job_id = u.id
         and u.id = any(v_done);
    end if;
    return query select unnest(v_done);
  end if;
  if cardinality(v_done) < cardinality(p_ids) then
    select jsonb_agg(jsonb_build_object('id', i.id, 'lease', i.lease, 'slot', i.slot, 'claim', i.claim,
                                        'started_at', to_timestamp(i.started_ms / 1000.0),
                                        'result', coalesce(i.result, 'null'::jsonb), 'ord', i.o - 1,
                                        'action', 'complete', 'keep', p_keep)
                     || case when i.unique_key is null then '{}'::jsonb
                             else jsonb_build_object('unique_key', i.unique_key) end
                     order by i.o)
      into v_rest
      from unnest(p_ids, p_leases, p_slots, p_claims, p_started_ms, p_results, p_unique_keys)
             with ordinality as i(id, lease, slot, claim, started_ms, result, unique_key, o)
     where not (i.id = any(v_done));
    return query select c.job_id from svc_qs.close_attempts(v_rest) c;
  end if;
end $$;
$fn$, '/*slot calls*/', v_row_calls);
end $gen$;

-- svc schema version 7: queue storage records starts and completions once per ring slot, and a prune never
-- truncates a completion it has not archived.
--
-- `record_starts` and `complete` found each item's claim with a lateral probe whose slot came from the item,
-- so every probe went through the partitioned tables' append with pruning at run time, per item. They now
-- loop over the distinct slots of the batch (usually one or two) and run the same statements with the slot
-- as a constant of the loop: the plan prunes to the slot's partitions when it starts, and each item is one
-- plain index probe. Same results, same locks; items without a slot take the former paths unchanged.
-- Measured in ADR 008 (bench/results/attempts.md).
--
-- archive_slot archived a slot's completions once per generation of the slot and then skipped. A producer
-- that read the current slot before a rotation can still insert into that slot after its prune (the late
-- writer); its job is claimed and completed there, and the next prune of the slot in the same generation
-- skipped the archive and truncated the completed job: it was gone. A prune now always archives the
-- completions of the slot that history does not hold yet; the leader's archive ahead of the prune still
-- skips a slot it has archived. Template parameters as in 0004 ({{qs}}: the queue-storage schema,
-- {{qs_name}}: its name as a literal).

-- Records that prefetched attempts started (their handler runs only after this commits). See 0004.
create or replace function {{qs}}.record_starts(p_items jsonb) returns setof bigint
language plpgsql set search_path from current as $$
declare
  v_slot smallint;
begin
  for v_slot in select distinct (x ->> 'slot')::smallint from jsonb_array_elements(p_items) x
                 where x ->> 'slot' is not null loop
    return query
    insert into {{qs}}.starts (slot, job_id, lease)
    select v_slot, t.job_id, t.lease
      from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint)
      cross join lateral (
        select t.job_id, t.lease from {{qs}}.spent t
         where t.slot = v_slot and t.job_id = i.id and t.lease = i.lease and t.is_claim limit 1) t
     where i.slot = v_slot
       and (select true from {{qs}}.closed c
             where c.slot = v_slot and c.job_id = t.job_id and c.lease = t.lease limit 1) is null
    on conflict do nothing
    returning job_id;
  end loop;
  -- Items without their claim's slot: found in any slot.
  return query
  insert into {{qs}}.starts (slot, job_id, lease)
  select t.slot, t.job_id, t.lease
    from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint)
    cross join lateral (
      select t.slot, t.job_id, t.lease from {{qs}}.spent t
       where t.job_id = i.id and t.lease = i.lease and t.is_claim limit 1) t
   where i.slot is null
     and (select true from {{qs}}.closed c
           where c.job_id = t.job_id and c.lease = t.lease and c.slot = t.slot limit 1) is null
  on conflict do nothing
  returning job_id;
end $$;

-- Completions, the hot path (see 0004): one closure per job, per slot of the batch.
create or replace function {{qs}}.complete(p_items jsonb, p_keep boolean) returns setof bigint
language plpgsql set search_path from current as $$
declare
  v_slot smallint;
  v_some bigint[];
  v_done bigint[] := '{}';
  v_rest jsonb;
  -- {"job id:lease": unique key} of the jobs that hold one
  v_keys jsonb := (select jsonb_object_agg((x ->> 'id') || ':' || (x ->> 'lease'), x -> 'unique_key')
                     from jsonb_array_elements(p_items) x where x ->> 'unique_key' is not null);
begin
  for v_slot in select distinct (x ->> 'slot')::smallint from jsonb_array_elements(p_items) x
                 where x ->> 'slot' is not null loop
    with cl as (
      insert into {{qs}}.closed (slot, job_id, lease, outcome, result)
      select v_slot, t.job_id, t.lease, case when p_keep then 'done' else 'dropped' end,
             case when p_keep then coalesce(i.result, 'null') end
        from jsonb_to_recordset(p_items) as i(id bigint, lease integer, slot smallint, result jsonb)
        cross join lateral (
          select t.job_id, t.lease from {{qs}}.spent t
           where t.slot = v_slot and t.job_id = i.id and t.lease = i.lease and t.is_claim limit 1) t
       where i.slot = v_slot
      on conflict do nothing
      returning job_id, lease),
    uk as (
      delete from {{qs}}.unique_keys k using cl
       where v_keys is not null and v_keys ? (cl.job_id || ':' || cl.lease)
         and k.unique_key = v_keys ->> (cl.job_id || ':' || cl.lease) and k.job_id = cl.job_id
      returning k.job_id)
    select array_agg(cl.job_id) into v_some from cl where (select count(*) from uk) >= 0;
    v_done := v_done || coalesce(v_some, '{}');
  end loop;
  return query select unnest(v_done);
  -- The rest (no slot, a claim no longer in the ring, or moved out of it) goes through close_attempts.
  if cardinality(v_done) < jsonb_array_length(p_items) then
    select jsonb_agg(x || jsonb_build_object('ord', o - 1, 'action', 'complete', 'keep', p_keep))
      into v_rest
      from jsonb_array_elements(p_items) with ordinality as e(x, o)
     where not ((x ->> 'id')::bigint = any(v_done));
    return query select c.job_id from {{qs}}.close_attempts(v_rest) c;
  end if;
end $$;

-- Copies the completions kept in ring slot p_slot into history (see 0004). p_check true (the leader, ahead
-- of the prune): once per generation of the slot, and only when nothing in it is open or unclaimed.
-- p_check false (prune, under the slot's exclusive locks, right before it truncates): always, skipping the
-- completions history already holds, so that a late writer's job completed after an earlier archive of this
-- generation is kept. Returns how many jobs were archived, or null when nothing was done.
create or replace function {{qs}}.archive_slot(p_slot smallint, p_check boolean default true) returns integer
language plpgsql set search_path from current as $$
declare
  v_gen bigint := (select max(generation) from {{qs}}.ring_rotations where slot = p_slot);
  v_pins record;
  v_again boolean;
  v integer;
begin
  if p_slot = {{qs}}.current_slot() then
    return null;
  end if;
  perform pg_advisory_xact_lock(hashtextextended({{qs_name}} || ':archive:' || p_slot, 0));
  v_again := exists (select 1 from {{qs}}.slot_archives a where a.slot = p_slot and a.generation = v_gen);
  if v_again and p_check then
    return null;
  end if;
  if p_check then
    v_pins := {{qs}}.slot_pins(p_slot);
    if v_pins.open_claims > 0 or v_pins.unclaimed > 0 then
      return null;
    end if;
  end if;
  insert into {{qs}}.history (class, finalized_at, job_id, lease, state, queue, priority, kind, args, attempt,
                              max_attempts, effective_max_attempts, run_at, created_at, attempted_at,
                              attempted_by, errors, tags, metadata, result, unique_key, trace_context)
  select 'completed', c.at, c.job_id, c.lease, 'completed', r.queue, r.priority, r.kind, r.args, r.attempt + 1,
         r.max_attempts, t.effective_max_attempts, r.run_at, r.created_at,
         coalesce(st.at, case when not t.prefetched then t.at end), t.worker, r.errors, r.tags, r.metadata,
         c.result, r.unique_key, r.trace_context
    from {{qs}}.closed c
    join {{qs}}.spent t on t.job_id = c.job_id and t.lease = c.lease and t.slot = c.slot and t.is_claim
    join {{qs}}.ready r on r.queue = t.queue and r.priority = t.priority and r.shard = t.shard and r.seq = t.seq
                       and r.slot = t.slot
    left join {{qs}}.starts st on st.job_id = t.job_id and st.lease = t.lease and st.slot = t.slot
   where c.slot = p_slot and t.slot = p_slot and r.slot = p_slot and c.outcome = 'done'
     and (not v_again or not exists (select 1 from {{qs}}.history h
                                      where h.job_id = c.job_id and h.lease = c.lease and h.class = 'completed'));
  get diagnostics v = row_count;
  insert into {{qs}}.slot_archives (slot, generation) values (p_slot, v_gen) on conflict do nothing;
  return v;
end $$;

-- svc schema version 7: queue storage records starts and completions once per ring slot.
--
-- `record_starts` and `complete` found each item's claim with a lateral probe whose slot came from the item,
-- so every probe went through the partitioned tables' append with pruning at run time, per item. They now
-- loop over the distinct slots of the batch (usually one or two) and run the same statements with the slot
-- as a constant of the loop: the plan prunes to the slot's partitions when it starts, and each item is one
-- plain index probe. Same results, same locks; items without a slot take the former paths unchanged.
-- Measured in ADR 008 (bench/results/attempts.md). Template parameters as in 0004 ({{qs}}: the queue-storage
-- schema).

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

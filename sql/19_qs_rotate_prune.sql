-- Queue storage: ring rotation, pruning of finished slots, and the history partitions.

-- Starts a new ring generation in the next empty slot once the current one is older than
-- p_interval_ms and holds rows. Returns the new slot, or null (not due, current slot empty, ring full).
-- Two leaders at once: the generation's primary key lets one win.
create or replace function svc_qs.rotate(p_interval_ms bigint) returns smallint
language plpgsql set search_path from current set jit = off as $$
declare
  v_gen bigint;
  v_slot smallint;
  v_at timestamptz;
  v_next smallint;
begin
  select generation, slot, at into v_gen, v_slot, v_at from svc_qs.ring_rotations order by generation desc limit 1;
  if v_at > now() - p_interval_ms * interval '1 millisecond' then
    return null;
  end if;
  if (select last_value from svc_qs.ring_position) / 1000 < v_gen then
    return null; -- producers have not moved to the last generation yet (sync_position)
  end if;
  if not exists (select 1 from svc_qs.ready where slot = v_slot) then
    return null; -- nothing to seal; truncating idle slots only costs catalog churn
  end if;
  for k in 1 .. svc_qs.slots() - 1 loop
    v_next := ((v_slot + k) % svc_qs.slots())::smallint;
    if svc_qs.slot_empty(v_next) then
      insert into svc_qs.ring_rotations (generation, slot) values (v_gen + 1, v_next) on conflict do nothing;
      return case when found then v_next end;
    end if;
  end loop;
  return null;
end $$;

-- Moves the ring's position (where producers write, write_slot) to the newest committed generation; the
-- leader calls it after every rotation, in a statement of its own so that the position never names a
-- generation whose rotation did not commit (the sequence is not rolled back). Only forward, one caller at
-- a time. Returns the position's slot.
create or replace function svc_qs.sync_position() returns smallint
language plpgsql volatile set search_path from current set jit = off as $$
declare
  v_pos bigint;
  v_gen bigint;
  v_slot smallint;
begin
  perform pg_advisory_xact_lock(hashtextextended('svc_qs' || ':position', 0));
  v_pos := (select last_value from svc_qs.ring_position);
  select generation, slot into v_gen, v_slot from svc_qs.ring_rotations order by generation desc limit 1;
  if v_gen > v_pos / 1000 then
    perform setval('svc_qs.ring_position', v_gen * 1000 + v_slot, true);
    return v_slot;
  end if;
  return (v_pos % 1000)::smallint;
end $$;

------------------------------------------------------------------------------------------------------
-- The ring's slots.
------------------------------------------------------------------------------------------------------

-- Whether a ring slot holds no rows at all.
create or replace function svc_qs.slot_empty(p_slot smallint) returns boolean language sql stable set search_path from current as $$
  select not exists (select 1 from svc_qs.ready where slot = p_slot)
     and not exists (select 1 from svc_qs.claims where slot = p_slot)
     and not exists (select 1 from svc_qs.completions where slot = p_slot)
     and not exists (select 1 from svc_qs.closed where slot = p_slot)
     and not exists (select 1 from svc_qs.skipped where slot = p_slot)
$$;

-- What still pins slot p_slot: open attempts and unclaimed rows (0 and 0: it can be reclaimed), and
-- whether it holds completed jobs (kept for the completed retention).
create or replace function svc_qs.slot_pins(p_slot smallint, out open_claims bigint, out unclaimed bigint,
                                 out completed boolean)
language sql stable set search_path from current as $$
  select (select coalesce(sum(n), 0) from svc_qs.claims where slot = p_slot)
           - (select coalesce(sum(cardinality(ids)), 0) from svc_qs.completions where slot = p_slot)
           - (select count(*) from svc_qs.closed where slot = p_slot),
         (select count(*) from svc_qs.ready where slot = p_slot)
           - (select coalesce(sum(n), 0) from svc_qs.claims where slot = p_slot)
           - (select count(*) from svc_qs.skipped where slot = p_slot),
         exists (select 1 from svc_qs.completions where slot = p_slot)
           or exists (select 1 from svc_qs.closed where slot = p_slot and outcome = 'complete')
$$;

-- When slot p_slot stopped being current: the start of the generation after its newest one.
create or replace function svc_qs.sealed_at(p_slot smallint) returns timestamptz language sql stable set search_path from current as $$
  select n.at from svc_qs.ring_rotations n
   where n.generation = (select max(g.generation) + 1 from svc_qs.ring_rotations g where g.slot = p_slot)
$$;

create or replace function svc_qs.prune(p_slot smallint, p_lock_wait_ms integer, p_forward boolean, p_keep_ms bigint)
returns text language plpgsql set search_path from current set jit = off as $$
declare
  v_pins record;
  v_queue text;
  v_cur smallint := svc_qs.current_slot();
  v_parts text := format('svc_qs.%I, svc_qs.%I, svc_qs.%I, svc_qs.%I, svc_qs.%I', 'ready_' || p_slot,
                         'claims_' || p_slot, 'completions_' || p_slot, 'closed_' || p_slot, 'skipped_' || p_slot);
begin
  if p_slot = v_cur then
    return 'current';
  end if;
  if svc_qs.slot_empty(p_slot) then
    return 'empty';
  end if;
  -- Retained, the usual answer for a sealed slot (every sealed slot, with a long retention), found without
  -- counting the slot's rows: its completed jobs stay readable until the completed retention has passed
  -- since it was sealed.
  if svc_qs.sealed_at(p_slot) > now() - p_keep_ms * interval '1 millisecond'
     and (exists (select 1 from svc_qs.completions where slot = p_slot)
          or exists (select 1 from svc_qs.closed where slot = p_slot and outcome = 'complete')) then
    return 'retained';
  end if;
  v_pins := svc_qs.slot_pins(p_slot);
  if v_pins.open_claims > 0 then
    return 'open_attempts';
  end if;
  if v_pins.unclaimed > 0 and not p_forward then
    return 'unclaimed';
  end if;
  if v_pins.completed and svc_qs.sealed_at(p_slot) > now() - p_keep_ms * interval '1 millisecond' then
    return 'retained';
  end if;
  -- Claims of the queues with unclaimed rows here wait until this transaction ends (try only: never wait).
  if v_pins.unclaimed > 0 then
    for v_queue in
      select distinct r.queue from svc_qs.jobs_available r where r.id in (select job_id from svc_qs.ready where slot = p_slot)
       order by 1
    loop
      if not pg_try_advisory_xact_lock(svc_qs.claim_lock_key(v_queue)) then
        return 'busy';
      end if;
    end loop;
  end if;
  begin
    if p_lock_wait_ms > 0 then
      perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
      execute 'lock table ' || v_parts || ' in access exclusive mode';
    else
      execute 'lock table ' || v_parts || ' in access exclusive mode nowait';
    end if;
  exception when lock_not_available then
    return 'busy';
  end;
  perform set_config('lock_timeout', '0', true);
  -- A producer that picked this slot's generation may still be on its way to it (write_slot): the slot is
  -- not reclaimed under it, where a later generation could reuse the slot and claims skip it. Producers
  -- write into the position's slot, which is current or about to be.
  if (select last_value from svc_qs.ring_position) % 1000 = p_slot then
    return 'current';
  end if;
  if not pg_try_advisory_xact_lock(svc_qs.generation_lock_key(
           (select max(g.generation) from svc_qs.ring_rotations g where g.slot = p_slot))) then
    return 'busy';
  end if;
  -- Again under the locks: what committed before them is visible to this new statement.
  v_cur := svc_qs.current_slot();
  if p_slot = v_cur then
    return 'current';
  end if;
  v_pins := svc_qs.slot_pins(p_slot);
  if v_pins.open_claims > 0 then
    return 'open_attempts';
  end if;
  if v_pins.unclaimed > 0 then
    if not p_forward then
      return 'unclaimed';
    end if;
    v_cur := svc_qs.write_slot();
    insert into svc_qs.ready (slot, queue, priority, shard, seq, job_id, kind, args, attempt, max_attempts, lease,
                              run_at, created_at, errors, tags, metadata, unique_key, trace_context, claimed_at, attempted_at,
                              attempted_by, limit_key)
    select v_cur, r.queue, r.priority, r.shard, r.seq, r.job_id, r.kind, r.args, r.attempt, r.max_attempts, r.lease,
           r.run_at, r.created_at, r.errors, r.tags, r.metadata, r.unique_key, r.trace_context, r.claimed_at, r.attempted_at,
           r.attempted_by, r.limit_key
      from svc_qs.ready r
     where r.slot = p_slot
       and r.seq > svc_qs.lane_cursor(r.queue, r.priority, r.shard)
       and not exists (select 1 from svc_qs.skipped s where s.queue = r.queue and s.priority = r.priority
                         and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot);
  end if;
  execute 'truncate ' || v_parts;
  return 'pruned';
end $$;

-- History partitions: ranges of p_width_ms aligned to the epoch, created up to p_ahead widths ahead.
-- A range is attached to its class's table (SHARE UPDATE EXCLUSIVE on the parent, so writers go on);
-- locks are awaited at most p_lock_wait_ms. Returns how many were created.
create or replace function svc_qs.ensure_history(p_class text, p_width_ms bigint, p_ahead integer, p_lock_wait_ms integer)
returns integer language plpgsql set search_path from current set jit = off as $$
declare
  v_parent text := 'history_' || p_class;
  v_upper timestamptz;
  v_from timestamptz;
  v_to timestamptz;
  v_name text;
  v_n integer := 0;
begin
  select max((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz)
    into v_upper
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
   where i.inhparent = ('svc_qs.' || v_parent)::regclass and pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT';
  -- Only windows that have not started: a row of the current window may already be in the default
  -- partition (or on its way there), and a range over it could not be attached.
  v_from := greatest(coalesce(v_upper, '-infinity'),
                     to_timestamp((floor(extract(epoch from now()) * 1000 / p_width_ms) + 1) * p_width_ms / 1000.0));
  perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
  while v_from < now() + p_ahead * p_width_ms * interval '1 millisecond' loop
    v_to := v_from + p_width_ms * interval '1 millisecond';
    v_name := v_parent || '_' || to_char(v_from at time zone 'UTC', 'YYYYMMDD"T"HH24MISS');
    begin
      execute format('create table svc_qs.%I (like svc_qs.history including defaults including constraints)', v_name);
      execute format('alter table svc_qs.%I attach partition svc_qs.%I for values from (%L) to (%L)',
                     v_parent, v_name, v_from, v_to);
    exception when lock_not_available or check_violation then
      return v_n; -- busy, or rows of that window are in the default partition already: next time
    end;
    v_n := v_n + 1;
    v_from := v_to;
  end loop;
  return v_n;
end $$;

-- Drops history ranges of a class that ended before now - p_retention_ms (truncated first, so the space
-- is free even when the drop must wait for a later try), and deletes expired rows of the default
-- partition (only rows written while no range covered their time). Returns rows removed (estimated
-- for dropped ranges).
create or replace function svc_qs.expire_history(p_class text, p_retention_ms bigint, p_lock_wait_ms integer)
returns bigint language plpgsql set search_path from current set jit = off as $$
declare
  r record;
  v_n bigint := 0;
  v_deleted bigint;
  v_cut timestamptz := now() - p_retention_ms * interval '1 millisecond';
begin
  perform set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
  for r in
    select c.oid::regclass as rel, c.reltuples,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz as upper
      from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = ('svc_qs.history_' || p_class)::regclass and pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
  loop
    continue when r.upper > v_cut;
    begin
      execute format('truncate %s', r.rel);
      execute format('drop table %s', r.rel);
      v_n := v_n + greatest(r.reltuples, 0)::bigint;
    exception when lock_not_available then
      null; -- busy now; the next run tries again
    end;
  end loop;
  execute format('delete from svc_qs.%I where finalized_at < %L', 'history_' || p_class || '_default', v_cut);
  get diagnostics v_deleted = row_count;
  return v_n + v_deleted;
exception when lock_not_available then
  return v_n;
end $$;

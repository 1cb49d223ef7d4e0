-- Queue storage: the ring's sizing as constants. The number of ring slots and of producer shards per lane
-- are fixed when queue storage is first installed (storage_state.qs_slots, qs_shards; docs/reference/
-- storage.md); these two functions return them. Each is one immutable SQL `select` of a literal, which
-- the planner inlines and folds, so a statement that calls them costs what the literal would.
do $gen$
declare
  v_slots integer := (select qs_slots from storage_state);
  v_shards integer := (select qs_shards from storage_state);
begin
  execute format($fn$
    create or replace function svc_qs.slots() returns integer language sql immutable parallel safe
    as 'select %s'
  $fn$, v_slots);
  execute format($fn$
    create or replace function svc_qs.shards() returns integer language sql immutable parallel safe
    as 'select %s'
  $fn$, v_shards);
end $gen$;

-- svc schema version 3: callback resolutions in batches.
-- Runs with search_path set to the target schema; nothing here names the schema.
--
-- The callback receiver groups the callbacks that arrive together into one call (one round trip and
-- one commit instead of one per callback). Each item is resolved exactly as resolve_callback does it;
-- the items are taken in job-id order so that two batches lock the same jobs in the same order.
create function resolve_callbacks(p_items json)
returns table (ord integer, outcome text, job_id bigint, state job_state, timeout_at timestamptz)
language plpgsql set search_path from current as $$
declare
  r record;
begin
  for r in
    select i.*
      from json_to_recordset(p_items) as i(ord integer, id uuid, action text, payload text, error text,
                                           retryable boolean, timeout_seconds integer)
     -- one index probe per item (a join would hash the whole callbacks table)
     order by (select c.job_id from callbacks c where c.id = i.id) nulls last, i.ord
  loop
    return query select r.ord, x.outcome, x.job_id, x.state, x.timeout_at
      from resolve_callback(r.id, r.action, r.payload::jsonb, r.error, r.retryable, r.timeout_seconds) x;
  end loop;
end $$;

-- svc schema version 13: a job's limit key, carried through its whole life (ADR 019, step 1).
--
-- `limit_key` is the key that per-key limits count by: the enqueue option `limitKey` (the SQL API's
-- `limit_key`), or the kind's own `limitKey(args)` evaluated by the client. A job keeps it as it keeps its
-- unique key: on canonical's jobs row, and on every queue-storage table that holds a copy of a job's
-- columns (ready, deferred, parked, history; the partitions of a partitioned table, those made later
-- included, take the column from their parent). `parked.waiter` will say what waits for a parked
-- attempt's callback ('http' or 'in_process'); it stays null until the limits count parked attempts.
-- Nothing is enforced yet. Nullable columns without a default: no table is rewritten. Each statement may
-- run again (a database recorded at a development state below the baseline gets every migration again).
alter table jobs add column if not exists limit_key text;

alter table {{qs}}.ready add column if not exists limit_key text;

alter table {{qs}}.deferred add column if not exists limit_key text;

alter table {{qs}}.parked add column if not exists limit_key text;

alter table {{qs}}.parked add column if not exists waiter text check (waiter in ('http', 'in_process'));

alter table {{qs}}.history add column if not exists limit_key text;

create index if not exists parked_queue_limit_key_idx on {{qs}}.parked (queue, limit_key);

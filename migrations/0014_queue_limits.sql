-- svc schema version 14: fleet-wide limits per queue (ADR 019).
--
-- One row per queue whose limits every claim obeys, whatever process or deployment makes it. A worker's
-- `limit` option only seeds a row that does not exist; `svc queue limit`, the REST API and the UI write it.
-- `queues.limited` is read by the claim beside `paused`, so a queue without a limit pays one column.
create table if not exists queue_limits (
  queue        text primary key check (queue ~ '^[A-Za-z0-9_.-]{1,48}$'),
  concurrency  integer check (concurrency >= 1),
  rate         integer check (rate >= 1),
  per_ms       integer check (per_ms between 1 and 86400000),
  per_key      integer check (per_key >= 1),
  count_parked boolean not null default false,
  -- Claims of the queue have been logged without a gap since this time: a rate is enforced once its
  -- whole window lies after it (a rate added to a queue starts counting when it is set).
  rate_logged_since timestamptz,
  in_force     text[] not null default '{}',
  fence        bigint,
  set_by       text not null,
  updated_at   timestamptz not null default now(),
  check ((rate is null) = (per_ms is null))
);

alter table queues add column if not exists limited boolean not null default false;

-- The claims of rate-limited queues, one row per claim that took jobs (held ones included), on both
-- engines (while the storage transition is mixed, both engines' claims of a queue write here under the
-- same claim lock). The leader deletes rows older than their queue's window: a queue limited to R claims
-- per window writes at most R rows per window, so its dead rows are bounded by the limit itself.
create table if not exists limit_log (
  queue text not null,
  at    timestamptz not null,
  n     integer not null check (n > 0)
);
create index if not exists limit_log_queue_at_idx on limit_log (queue, at);

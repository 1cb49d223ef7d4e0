-- svc schema version 2: cron schedules.
-- Runs with search_path set to the target schema; nothing here names the schema.
--
-- A schedule is declared by a worker (`cron` option, upserted at start; a sync never deletes rows,
-- so deployments that declare different schedules share the table) or by `svc cron add`. Only the
-- elected leader evaluates schedules. Each fire is enqueued at most once: the leader's statement
-- moves `last_fire_at` from the value it read to the newest fire time (compare-and-swap) and
-- inserts the jobs in that same statement, so a second leader holding a stale read inserts nothing.
create table cron_schedules (
  name          text primary key check (name ~ '^[A-Za-z0-9_.:-]{1,128}$'),
  schedule      text not null check (length(schedule) between 1 and 255),
  timezone      text not null default 'UTC',
  kind          text not null check (length(kind) between 1 and 255),
  args          jsonb not null default '{}' check (jsonb_typeof(args) = 'object'),
  queue         text not null default 'default' check (queue ~ '^[A-Za-z0-9_.-]{1,48}$'),
  priority      smallint not null default 2 check (priority between 1 and 4),
  max_attempts  integer not null default 25 check (max_attempts between 1 and 1000),
  tags          text[] not null default '{}',
  metadata      jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
  -- Missed fire times enqueued after downtime: 0 coalesces them into one run (the newest).
  catch_up      integer not null default 0 check (catch_up between 0 and 1000),
  paused        boolean not null default false,
  -- The newest fire time enqueued (the compare-and-swap column; null until the first fire).
  -- Whole milliseconds, so that a client compares back exactly the value it read.
  last_fire_at  timestamptz check (last_fire_at = date_trunc('milliseconds', last_fire_at)),
  -- Fire times at or before this are never enqueued: set at creation and on resume.
  evaluate_from timestamptz not null default now(),
  -- Who last declared the schedule: a worker's runtime id, or `cli`.
  declared_by   text,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  synced_at     timestamptz not null default now()
);

-- svc schema version 10 from version 8 (a development state whose other tables are the baseline's already).
-- Template parameters as in 0010_baseline.sql.

-- The progress handlers report (`ctx.progress`), one row per job on either engine: the latest value (JSON,
-- at most 4 KB serialized, checked by the worker) and the run lease of the attempt that wrote it. Readers
-- show a row only while its lease is the job's, so an attempt's progress goes with it. Workers write at most
-- once a second, one statement for every job with news; a job whose handler reports nothing costs nothing
-- here. The leader deletes rows older than the longer retention.
create table attempt_progress (
  job_id bigint primary key,
  lease  integer not null,
  value  jsonb not null,
  at     timestamptz not null default now()
);

-- The leader's cleanup deletes by age once a minute: an index scan, not a scan of every row.
create index attempt_progress_at on attempt_progress (at);

-- When the job's latest attempt was claimed (held jobs included). `attempted_at` is when its handler started,
-- written with the attempt's outcome; while an attempt runs only `claimed_at` is set.
alter table jobs add column if not exists claimed_at timestamptz;

alter table {{qs}}.ready add column if not exists claimed_at timestamptz;

alter table {{qs}}.deferred add column if not exists claimed_at timestamptz;

alter table {{qs}}.parked add column if not exists claimed_at timestamptz;

alter table {{qs}}.history add column if not exists claimed_at timestamptz;

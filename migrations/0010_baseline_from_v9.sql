-- svc schema version 10 from version 9 (a development state with the baseline's tables, before claimed_at).
-- Template parameters as in 0010_baseline.sql.

-- When the job's latest attempt was claimed (held jobs included). `attempted_at` is when its handler started,
-- written with the attempt's outcome; while an attempt runs only `claimed_at` is set.
alter table jobs add column if not exists claimed_at timestamptz;

alter table {{qs}}.ready add column if not exists claimed_at timestamptz;

alter table {{qs}}.deferred add column if not exists claimed_at timestamptz;

alter table {{qs}}.parked add column if not exists claimed_at timestamptz;

alter table {{qs}}.history add column if not exists claimed_at timestamptz;

-- svc schema version 10 from version 7 (the older line): the queue-storage tables that replaced spent,
-- closed, starts and slot_archives (claims and completions per batch, closures, skipped positions, deleted
-- jobs). Every other table of version 7 is already as the baseline (0010_baseline.sql) has it. The
-- functions and views of version 7 are dropped by `svc migrate` before this file runs, and sql/*.sql
-- creates them anew after it. Template parameters as in 0010_baseline.sql.

drop table {{qs}}.slot_archives;

-- The ring's per-job tables of version 7 go (a database of the older line runs the canonical engine,
-- whose jobs are in the jobs table; its queue-storage tables are empty).
drop table {{qs}}.starts;

drop table {{qs}}.spent;

drop table {{qs}}.closed;

create sequence {{qs}}.claim_seq;

-- One row per claim, lane shard and ring slot: the claim took every ready row of the lane shard in that
-- slot whose seq is in [first_seq, last_seq] and that has no skipped row. A lane's cursor is the highest
-- last_seq of its claims.
create table {{qs}}.claims (
  slot        smallint not null,
  queue       text not null,
  priority    smallint not null,
  shard       smallint not null,
  first_seq   bigint not null,
  last_seq    bigint not null,
  claim_id    bigint not null,
  -- jobs taken (positions in the range minus skipped ones)
  n           integer not null,
  worker      text not null,
  at          timestamptz not null,
  -- {kind: {max_attempts, timeout_ms, delays_ms}} of the claiming worker
  policies    jsonb,
  -- the prefetch TTL added to the deadlines of a claim that held jobs beyond its free slots
  ttl_ms      bigint not null default 0,
  -- the earliest deadline of the claim's jobs (null: none has one)
  deadline_at timestamptz,
  primary key (queue, priority, shard, last_seq, slot)
) partition by list (slot);

create index on {{qs}}.claims (claim_id);

create index on {{qs}}.claims (worker, at);

create index on {{qs}}.claims (deadline_at) where deadline_at is not null;

-- Completions by the claiming worker, one row per flush, claim and slot.
create table {{qs}}.completions (
  slot        smallint not null,
  claim_id    bigint not null,
  at          timestamptz not null default now(),
  ids         bigint[] not null,
  leases      integer[] not null,
  started_at  timestamptz[] not null,
  results     jsonb[] not null
) partition by list (slot);

create index on {{qs}}.completions (claim_id);

-- Every other closure, one per attempt (the primary key makes the first writer win).
create table {{qs}}.closed (
  slot       smallint not null,
  job_id     bigint not null,
  lease      integer not null,
  outcome    text not null,
  at         timestamptz not null default now(),
  started_at timestamptz,
  result     jsonb,
  primary key (job_id, lease, slot)
) partition by list (slot);

-- Ready rows consumed without a claim (a job cancelled while available).
create table {{qs}}.skipped (
  slot     smallint not null,
  queue    text not null,
  priority smallint not null,
  shard    smallint not null,
  seq      bigint not null,
  job_id   bigint not null,
  at       timestamptz not null default now(),
  primary key (queue, priority, shard, seq, slot)
) partition by list (slot);

do $$
begin
  for i in 0 .. {{slots}} - 1 loop
    execute format('create table {{qs}}.%I partition of {{qs}}.claims for values in (%s)', 'claims_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.completions for values in (%s)', 'completions_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.closed for values in (%s)', 'closed_' || i, i);
    execute format('create table {{qs}}.%I partition of {{qs}}.skipped for values in (%s)', 'skipped_' || i, i);
  end loop;
end $$;

-- Finished jobs deleted by an operator: hidden from every read; their ring rows go with their slot.
create table {{qs}}.deleted (
  job_id bigint primary key,
  at     timestamptz not null default now()
);

comment on table {{qs}}.deleted is 'svc:job-data';

comment on table {{qs}}.claims is 'svc:job-data';

comment on table {{qs}}.completions is 'svc:job-data';

comment on table {{qs}}.closed is 'svc:job-data';

comment on table {{qs}}.skipped is 'svc:job-data';

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

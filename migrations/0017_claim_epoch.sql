-- svc schema version 17: outcomes of a lost claim change nothing (ADR 021).
--
-- A claim lost anyway (a server run with synchronous_commit = off, a failover to a standby that had not
-- received it) leaves its jobs available, and the recovered claim id sequence may hand its ids out again:
-- `claim_epoch` is unlogged, so recovery after a crash empties it (a promoted standby has it empty), and the
-- first claim that finds it empty moves the sequence past every id given out before (to the clock in
-- microseconds) and writes its row. A worker's outcome names its claim id, so an outcome of a lost claim
-- matches no claim of the recovered server. A parked attempt keeps its claim id for the same check. Each
-- statement may run again.
create unlogged table if not exists {{qs}}.claim_epoch (
  started_at  timestamptz not null default now(),
  first_claim bigint not null
);

alter table {{qs}}.parked add column if not exists claim_id bigint;

-- Claims before this version committed durably: the epoch starts at the sequence as it is.
insert into {{qs}}.claim_epoch (first_claim)
select (select s.last_value from {{qs}}.claim_seq s) + 1 where not exists (select 1 from {{qs}}.claim_epoch);

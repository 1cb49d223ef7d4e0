-- svc schema version 17: queue storage's claims commit without waiting for the WAL flush (ADR 021).
--
-- A claim lost in a server crash leaves its jobs available, and the recovered claim id sequence may hand
-- its ids out again: `claim_epoch` is unlogged, so recovery after a crash (or an immediate shutdown) empties
-- it, and the first claim that finds it empty moves the sequence past every id given out before (to the
-- clock in microseconds) and writes its row. A worker's outcome names its claim id, so an outcome of a claim
-- lost in a crash matches no claim of the recovered server. A parked attempt keeps its claim id for the same
-- check. Each statement may run again.
create unlogged table if not exists {{qs}}.claim_epoch (
  started_at  timestamptz not null default now(),
  first_claim bigint not null
);

alter table {{qs}}.parked add column if not exists claim_id bigint;

-- Claims before this version committed durably: the epoch starts at the sequence as it is.
insert into {{qs}}.claim_epoch (first_claim)
select (select s.last_value from {{qs}}.claim_seq s) + 1 where not exists (select 1 from {{qs}}.claim_epoch);

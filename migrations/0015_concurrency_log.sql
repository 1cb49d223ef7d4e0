-- svc schema version 15: concurrency limits on queue storage (ADR 019, step 4).
--
-- A claim of a queue with a concurrency limit writes one `limit_open` row: the queue's open ring attempts
-- after it (job, lease, slot and claim batch of each, with its limit key). The next claim of the queue reads
-- the newest row (one index probe), keeps the entries whose attempt has not ended, adds what it takes, and
-- writes the result: nothing is written when a job ends. Rows are only inserted; the leader deletes every
-- row of a queue but its newest one, so the newest is never a dead tuple and its probe stays one lookup
-- while a long transaction holds back vacuum. Parked attempts are counted from `parked` itself: those that
-- hold a unit (in-process waiters and attempts moved out of the ring for running long; HTTP parks only when
-- the queue counts them) are read through a partial index. Each statement may run again.
create table if not exists {{qs}}.limit_open (
  queue      text not null,
  claim_id   bigint not null,
  at         timestamptz not null default now(),
  job_ids    bigint[] not null,
  leases     integer[] not null,
  slots      smallint[] not null,
  claim_ids  bigint[] not null,
  limit_keys text[] not null,
  primary key (queue, claim_id)
);

-- What waits for a parked attempt's callback, for the parked rows written before the park recorded it.
update {{qs}}.parked p set waiter = c.kind
  from {{qs}}.callbacks c
 where p.waiter is null and p.state = 'waiting_external' and c.job_id = p.job_id and c.lease = p.lease
   and c.state = 'pending';

create index if not exists parked_held_units_idx on {{qs}}.parked (queue) where waiter is distinct from 'http';

-- svc schema version 16: per-key limits take jobs they moved aside back themselves (ADR 019, step 5).
--
-- A claim of a queue with a per-key limit moves a job whose key is full aside, into `deferred`, due at once;
-- the queue's next claim puts the ones whose key has room back at the end of their lane itself, instead of
-- waiting for the leader's promotion. This index finds them: the keyed jobs of a queue in `deferred`, by due
-- time (scheduled and retrying jobs without a key are not in it). Each statement may run again.
create index if not exists deferred_keyed_idx on {{qs}}.deferred (queue, run_at) where limit_key is not null;

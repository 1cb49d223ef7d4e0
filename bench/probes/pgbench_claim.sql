-- The claim statement of src/storage/canonical/claim.ts with literal parameters (queue default, 10 jobs), for pgbench.
with next as (
  select id from svc.jobs where state = 'available' and queue = 'default'
    and not exists (select 1 from svc.queues q where q.name = 'default' and q.paused)
  order by priority, run_at, id limit 10 for update skip locked)
update svc.jobs j set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1, attempted_at = now(),
  heartbeat_at = now(), attempted_by = 'x',
  deadline_at = now() + (('{"noop":60000}'::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
from next where j.id = next.id returning j.*;

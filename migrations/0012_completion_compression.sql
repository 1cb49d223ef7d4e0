-- svc schema version 12: the arrays of a completions row are compressed with lz4 where the server has it.
--
-- A completion flush of a few hundred jobs writes arrays of a few kilobytes, which PostgreSQL compresses
-- before it stores them; pglz took about 0.2 ms of a 340-job flush's backend time, lz4 about a seventh of
-- that (ADR 016). A server built without lz4 keeps pglz. Partitions made later take the parent's setting.
do $$
declare
  r record;
begin
  for r in
    select '{{qs}}.completions'::regclass as rel
    union all
    select i.inhrelid::regclass from pg_inherits i where i.inhparent = '{{qs}}.completions'::regclass
  loop
    execute format('alter table %s alter column ids set compression lz4, alter column leases set compression lz4,
                    alter column started_at set compression lz4, alter column results set compression lz4', r.rel);
  end loop;
exception when feature_not_supported then
  raise notice 'svc: this server has no lz4 compression; completions stay compressed with pglz';
end $$;

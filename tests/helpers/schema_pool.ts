/**
 * A pool of migrated test schemas, handed out and reset instead of migrated and dropped per test (as River's
 * `riverdbtest` does). A migrate creates about 220 relations and 120 functions; in a test run it was the
 * server's largest cost (half of the time its backends were busy went to the baseline migration and to
 * dropping schemas again), and every drop left about 4,000 dead catalog rows behind on a server whose
 * autovacuum is off.
 *
 * The test runner (tests/run.ts) makes a control schema per engine pass and names it in
 * SVC_TEST_SCHEMA_POOL; `testClient` then takes a free schema of its engine, or migrates a new one and
 * records it. Giving a schema back resets it to what the migrate left, in one call: it checks first that
 * the test changed no definition (a fingerprint of the schemas' relations, columns, functions, views,
 * triggers, constraints, types and privileges, against the one taken after the migrate), then truncates
 * every table, puts back the rows the migrate wrote, sets every sequence to where the migrate left it and
 * clears the tables' statistics counters. A schema whose definitions changed, whose tables were analyzed
 * (planner statistics outlive a truncate), or whose reset fails (a lock still held after three seconds), is
 * dropped, as every schema was before. A schema given back is handed out again only after two seconds,
 * so that a straggler of the test that had it (a child process being killed) cannot reach the next one.
 * At the end of the pass the runner drops every schema the pool made, and the control schema.
 *
 * Without SVC_TEST_SCHEMA_POOL (a file run with `deno test` directly) nothing here is used.
 */
import postgres from "postgres";

/** The control schema of this pass, set by the test runner; unset: no pool. */
export const SCHEMA_POOL: string | undefined = Deno.env.get("SVC_TEST_SCHEMA_POOL") || undefined;

const POOL_NAME = /^svct_pool_[a-z0-9]+$/;

function connect(url: string, pooled: boolean): postgres.Sql {
  return postgres(url, { max: 1, onnotice: () => {}, prepare: !pooled });
}

/** The control schema's tables and functions (`P` is replaced by its name). */
const CONTROL_SQL = `
create schema P;
create table P.made (
  schema_name text primary key,
  engine text not null,
  fingerprint text not null,
  snapshot jsonb not null,
  sequences jsonb not null,
  reused integer not null default 0);
create table P.free (
  schema_name text primary key references P.made,
  engine text not null,
  released_at timestamptz not null default clock_timestamp());

-- What a test may change in a schema's definitions: the relations (with their columns, options and
-- privileges), views, functions, triggers, constraints, types and the schemas' privileges.
create function P.fingerprint(s text) returns text language sql stable as $f$
  with ns as (select oid, nspname, nspacl from pg_namespace where nspname in (s, s || '_qs'))
  select md5(string_agg(x, E'\\n' order by x)) from (
    select 'n ' || nspname || ' ' || coalesce(nspacl::text, '') from ns
    union all
    select 'c ' || ns.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' '
           || coalesce(c.reloptions::text, '') || ' ' || c.relrowsecurity || ' ' || c.relpersistence::text || ' '
           || coalesce((select string_agg(a.attname || ':' || a.atttypid || ':' || a.attnotnull || ':'
                                          || coalesce(a.attacl::text, ''), ',' order by a.attnum)
                          from pg_attribute a where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '')
           || case when c.relkind in ('v', 'm') then ' ' || md5(pg_get_viewdef(c.oid)) else '' end
           || coalesce(' ' || pg_get_expr(c.relpartbound, c.oid), '')
      from pg_class c join ns on ns.oid = c.relnamespace
    union all
    select 'p ' || ns.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '
           || md5(p.prosrc) || ' ' || coalesce(p.proconfig::text, '') || ' ' || coalesce(p.proacl::text, '')
           || ' ' || p.provolatile::text || p.prokind::text
      from pg_proc p join ns on ns.oid = p.pronamespace
    union all
    select 't ' || t.tgrelid::regclass::text || ' ' || t.tgname || ' ' || t.tgenabled::text || ' ' || t.tgfoid::regproc::text
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join ns on ns.oid = c.relnamespace
    union all
    select 'k ' || co.conrelid::regclass::text || ' ' || co.conname || ' ' || md5(pg_get_constraintdef(co.oid))
      from pg_constraint co join ns on ns.oid = co.connamespace
    union all
    select 'y ' || ns.nspname || '.' || t.typname || ' '
           || coalesce((select string_agg(e.enumlabel, ',' order by e.enumsortorder) from pg_enum e
                         where e.enumtypid = t.oid), '')
      from pg_type t join ns on ns.oid = t.typnamespace
    union all
    select 'r ' || r.rulename || ' ' || r.ev_class::regclass::text
      from pg_rewrite r join pg_class c on c.oid = r.ev_class join ns on ns.oid = c.relnamespace
     where r.rulename <> '_RETURN'
  ) f(x)
$f$;

-- The tables of both schemas that rows can be written to (partitions through their parents).
create function P.tables(s text) returns setof regclass language sql stable as $f$
  select c.oid::regclass from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname in (s, s || '_qs') and c.relkind in ('r', 'p') and not c.relispartition
$f$;

-- Records a freshly migrated schema: its fingerprint, the rows the migrate wrote, its sequences.
create function P.register(s text, p_engine text) returns void language plpgsql as $f$
declare
  t regclass;
  v_rows jsonb;
  v_snapshot jsonb := '{}';
  v_seqs jsonb := '{}';
  q record;
begin
  for t in select * from P.tables(s) loop
    execute format('select jsonb_agg(to_jsonb(x)) from %s x', t) into v_rows;
    if v_rows is not null then
      v_snapshot := v_snapshot || jsonb_build_object(t::text, v_rows);
    end if;
  end loop;
  for q in select c.oid::regclass as seq from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname in (s, s || '_qs') and c.relkind = 'S' loop
    execute format('select jsonb_build_array(last_value, is_called) from %s', q.seq) into v_rows;
    v_seqs := v_seqs || jsonb_build_object(q.seq::text, v_rows);
  end loop;
  insert into P.made values (s, p_engine, P.fingerprint(s), v_snapshot, v_seqs);
end $f$;

-- Resets a schema to what its migrate left and puts it in the free list; false (and nothing changed)
-- when the test changed its definitions.
create function P.give_back(s text) returns boolean language plpgsql as $f$
declare
  m P.made;
  k text;
  v jsonb;
begin
  select * into m from P.made where schema_name = s;
  if m.schema_name is null or P.fingerprint(s) is distinct from m.fingerprint then
    return false;
  end if;
  -- Planner statistics of an analyzed table would outlive the truncate and change the next test's plans.
  if exists (select 1 from pg_stats where schemaname in (s, s || '_qs')) then
    return false;
  end if;
  perform set_config('lock_timeout', '3s', true);
  execute 'truncate ' || (select string_agg(t::text, ', ') from P.tables(s) t);
  for k, v in select * from jsonb_each(m.snapshot) loop
    execute format('insert into %s overriding system value select * from jsonb_populate_recordset(null::%s, $1)', k, k)
      using v;
  end loop;
  for k, v in select * from jsonb_each(m.sequences) loop
    perform setval(k::regclass, (v ->> 0)::bigint, (v ->> 1)::boolean);
  end loop;
  -- The statistics views count from zero again (tests compare scans and writes before and after).
  perform pg_stat_reset_single_table_counters(c.oid)
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname in (s, s || '_qs') and c.relkind in ('r', 'p', 'i');
  insert into P.free (schema_name, engine) values (s, m.engine);
  return true;
end $f$;
`;

/** Makes the control schema of a pass on `url` (the server itself, not a pooler); its name. */
export async function createSchemaPool(url: string): Promise<string> {
  const name = `svct_pool_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const sql = connect(url, false);
  try {
    await sql.unsafe(
      CONTROL_SQL.replaceAll("P.", `${name}.`).replace("create schema P;", `create schema ${name};`),
    );
  } finally {
    await sql.end();
  }
  return name;
}

/**
 * Drops every schema the pool made (free or still out) and the control schema; a line for the log: how many
 * schemas were migrated and how many times one was reused.
 */
export async function dropSchemaPool(url: string, name: string): Promise<string> {
  if (!POOL_NAME.test(name)) throw new Error(`not a schema pool: ${name}`);
  const sql = connect(url, false);
  try {
    const made = await sql.unsafe(`select schema_name, reused from ${name}.made`).catch(() => []);
    for (const { schema_name: s } of made) {
      await sql.unsafe(`drop schema if exists "${s}_qs" cascade; drop schema if exists "${s}" cascade`);
    }
    await sql.unsafe(`drop schema if exists ${name} cascade`);
    const reused = made.reduce((n, r) => n + Number(r.reused), 0);
    return `schema pool: ${made.length} schemas migrated, reused ${reused} times`;
  } finally {
    await sql.end();
  }
}

/** A free schema of `engine`, given back at least two seconds ago; null when there is none. */
export async function takePooledSchema(url: string, pooled: boolean, engine: string): Promise<string | null> {
  if (!SCHEMA_POOL) return null;
  const sql = connect(url, pooled);
  try {
    const [r] = await sql.unsafe(
      `with f as (
         delete from ${SCHEMA_POOL}.free where schema_name = (
           select schema_name from ${SCHEMA_POOL}.free
            where engine = $1 and released_at < clock_timestamp() - interval '2 seconds'
            order by released_at limit 1 for update skip locked)
         returning schema_name)
       update ${SCHEMA_POOL}.made m set reused = reused + 1 from f where m.schema_name = f.schema_name
       returning m.schema_name`,
      [engine],
    );
    return r ? r.schema_name : null;
  } finally {
    await sql.end();
  }
}

/** Records a schema just migrated for the pool (its fingerprint, rows and sequences). */
export async function registerPooledSchema(url: string, pooled: boolean, schema: string, engine: string) {
  if (!SCHEMA_POOL) return;
  const sql = connect(url, pooled);
  try {
    await sql.unsafe(`select ${SCHEMA_POOL}.register($1, $2)`, [schema, engine]);
  } finally {
    await sql.end();
  }
}

/**
 * Resets a pooled schema and frees it; when the test changed its definitions or the reset fails, drops it
 * instead (`drop`). Never throws for a reset that failed: the schema is dropped, as without a pool.
 */
export async function givePooledSchemaBack(
  url: string,
  pooled: boolean,
  schema: string,
  drop: (schema: string) => Promise<void>,
): Promise<void> {
  const sql = connect(url, pooled);
  let reset = false;
  try {
    const [r] = await sql.unsafe(`select ${SCHEMA_POOL}.give_back($1) as ok`, [schema]);
    reset = r.ok === true;
  } catch {
    reset = false;
  } finally {
    await sql.end();
  }
  if (!reset) await drop(schema);
}

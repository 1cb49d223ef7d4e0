/**
 * The upgrade path from the older line: a canonical database at schema version 7 (tests/fixtures/
 * v7_canonical.sql, dumped before the schema was squashed into the baseline, with jobs in every state, a
 * pending HTTP callback, a unique job and a cron schedule) is loaded into a database of its own with psql.
 * `svc migrate` brings it to the baseline with the same schema as a new install, and the whole staged
 * storage transition (prepare, enter-mixed-transition, finalize) then accounts for every one of its jobs.
 * Each test owns a database, so they run once (in the queue_storage pass of the suite).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { createClient } from "../../src/client/client.ts";
import { DATABASE_URL, engineTest, waitFor } from "../helpers/db.ts";
import { svc } from "../helpers/cli.ts";
import { startWorker } from "../helpers/worker.ts";
import { EXPECTED_SCHEMA_VERSION, MIGRATIONS } from "../../src/db/schema_version.ts";
import { LIBRARY_VERSION } from "../../src/version.ts";

const FIXTURE = new URL("../fixtures/v7_canonical.sql", import.meta.url).pathname;

/** The URL of `db` on the test server. */
function urlOf(db: string): string {
  const u = new URL(DATABASE_URL);
  u.pathname = `/${db}`;
  return u.toString();
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (out.code !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

/** A database of its own for the test (dropped afterwards, also when the test fails). */
async function withDatabase(prefix: string, fn: (url: string, db: string) => Promise<void>): Promise<void> {
  const db = `${prefix}_${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${db}"`);
    await fn(urlOf(db), db);
  } finally {
    await admin.unsafe(`drop database if exists "${db}" with (force)`);
    await admin.end();
  }
}

/** The fixture loaded into a database of its own. */
function withV7(fn: (url: string) => Promise<void>): Promise<void> {
  return withDatabase("svc_v7", async (url) => {
    await run("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", FIXTURE]);
    await fn(url);
  });
}

/**
 * The schema of svc in a database, read from the catalog (pg_dump of the system's version cannot read a
 * newer server, such as the embedded PostgreSQL 18 of a test run): every column in order with its type,
 * nullability and default, every index, constraint, function, view, trigger, enum, sequence and table
 * comment of the two schemas. The samples' day partitions (named by the day they were made) are left out.
 */
async function schemaOf(url: string): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql.unsafe(`
      with rel as (
        select c.oid, c.relname, c.relkind, n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname in ('svc', 'svc_qs') and c.relname !~ '^(queue|kind)_samples_2')
      select d from (
        select format('column %s.%s %s: %s %s not null %s default %s', r.nspname, r.relname, a.attnum, a.attname,
                      format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid)) as d
          from rel r join pg_attribute a on a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped
          left join pg_attrdef ad on ad.adrelid = a.attrelid and ad.adnum = a.attnum
         where r.relkind in ('r', 'p', 'v')
        union all
        select format('index %s', pg_get_indexdef(r.oid)) from rel r where r.relkind in ('i', 'I')
        union all
        -- (PostgreSQL 18 lists NOT NULL as constraints too; a restored dump names those of a partition after
        -- the partition, a new install after its parent: the name is left out, the definition compared)
        select format('constraint %s.%s %s', r.relname, case when co.contype = 'n' then '' else co.conname end,
                      pg_get_constraintdef(co.oid))
          from pg_constraint co join rel r on r.oid = co.conrelid
        union all
        select format('partition %s %s', r.relname, pg_get_expr(c.relpartbound, c.oid))
          from rel r join pg_class c on c.oid = r.oid where c.relispartition
        union all
        select format('view %s.%s %s', r.nspname, r.relname, pg_get_viewdef(r.oid)) from rel r where r.relkind = 'v'
        union all
        select format('sequence %s.%s', r.nspname, r.relname) from rel r where r.relkind = 'S'
        union all
        select format('comment %s %s', r.relname, obj_description(r.oid, 'pg_class')) from rel r
         where obj_description(r.oid, 'pg_class') is not null
        union all
        select format('trigger %s', pg_get_triggerdef(t.oid)) from pg_trigger t join rel r on r.oid = t.tgrelid
         where not t.tgisinternal
        union all
        select format('function %s', pg_get_functiondef(p.oid)) from pg_proc p
          join pg_namespace n on n.oid = p.pronamespace where n.nspname in ('svc', 'svc_qs')
        union all
        select format('enum %s %s', t.typname, (select array_agg(e.enumlabel order by e.enumsortorder)
                                               from pg_enum e where e.enumtypid = t.oid))
          from pg_type t join pg_namespace n on n.oid = t.typnamespace
         where n.nspname in ('svc', 'svc_qs') and t.typtype = 'e'
      ) x order by d`);
    return rows.map((r) => String(r.d));
  } finally {
    await sql.end();
  }
}

/** The fixture's jobs, by kind: their ids and states at version 7. */
const FIXTURE_STATES: Record<string, string> = {
  "fixture.available": "available",
  "fixture.scheduled": "scheduled",
  "fixture.running": "running",
  "fixture.waiting": "waiting_external",
  "fixture.retryable": "retryable",
  "fixture.completed": "completed",
  "fixture.failed": "failed",
  "fixture.cancelled": "cancelled",
};

engineTest(
  "queue_storage",
  "upgrade: svc migrate brings the version-7 fixture to the baseline, with the schema of a new install",
  () =>
    withV7(async (url) => {
      const r = await svc(["migrate", "--json"], { DATABASE_URL: url });
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.deepEqual([out.from_version, out.to_version, out.applied, out.engine], [
        7,
        EXPECTED_SCHEMA_VERSION,
        MIGRATIONS.map((m) => m.version),
        "canonical",
      ]);
      const client = createClient({ databaseUrl: url, maxConnections: 2 });
      try {
        const jobs = (await client.listJobs({ limit: 100 })).jobs;
        assert.equal(jobs.length, 9, "every job of the fixture is there");
        for (const j of jobs) assert.equal(j.state, FIXTURE_STATES[j.kind], `${j.kind} keeps its state`);
        const [st] = await client.sql.unsafe(`select engine, transition from svc.storage_state`);
        assert.deepEqual([st.engine, st.transition], ["canonical", "canonical"]);
        const [v] = await client.sql.unsafe(`select library_version from svc.sql_version`);
        assert.equal(v.library_version, LIBRARY_VERSION);
        const [cron] = await client.sql.unsafe(
          `select kind from svc.cron_schedules where name = 'fixture-nightly'`,
        );
        assert.equal(cron.kind, "fixture.cron");
        // A second migrate changes nothing.
        const again = await svc(["migrate", "--json"], { DATABASE_URL: url });
        assert.equal(again.code, 0, again.stderr);
        assert.deepEqual(JSON.parse(again.stdout).applied, []);
      } finally {
        await client.close();
      }
      await withDatabase("svc_new", async (fresh) => {
        const m = await svc(["migrate"], { DATABASE_URL: fresh });
        assert.equal(m.code, 0, m.stderr);
        const [a, b] = [await schemaOf(url), await schemaOf(fresh)];
        assert.ok(
          a.some((d) => d.startsWith("function CREATE OR REPLACE FUNCTION svc_qs.claim(")),
          "functions too",
        );
        assert.ok(a.length > 1000, `${a.length} definitions`);
        assert.deepEqual(a, b, "the upgraded schema is the schema of a new install");
      });
    }),
);

engineTest(
  "queue_storage",
  "upgrade: the staged storage transition from the version-7 fixture accounts for every job",
  () =>
    withV7(async (url) => {
      const m = await svc(["migrate"], { DATABASE_URL: url });
      assert.equal(m.code, 0, m.stderr);
      const client = createClient({ databaseUrl: url, maxConnections: 4, heartbeatInterval: 200 });
      const before = new Map(
        (await client.listJobs({ limit: 100 })).jobs.map((j) => [j.id, { kind: j.kind, state: j.state }]),
      );
      assert.equal(before.size, 9);
      const [cb] = await client.sql.unsafe(`select id from svc.callbacks where state = 'pending'`);
      const ran: number[] = [];
      const handler = (job: { id: number }) => {
        ran.push(job.id);
        return { ran: true };
      };
      const { stop } = await startWorker(client, {
        queues: { default: { maxWorkers: 2 }, mail: { maxWorkers: 2 } },
        handlers: { "fixture.available": handler, "fixture.running": handler },
      });
      try {
        const step = async (...args: string[]) => {
          const r = await svc(["storage", ...args], { DATABASE_URL: url });
          assert.equal(r.code, 0, `${args.join(" ")}: ${r.stdout} ${r.stderr}`);
          return r.stdout;
        };
        await waitFor(
          async () => (await client.storageStatus()).runtimes.queue_storage_capable > 0,
          10_000,
          "a worker that runs queue storage",
        );
        assert.match(await step("prepare"), /canonical -> prepared/);
        assert.match(await step("enter-mixed-transition"), /prepared -> mixed_transition/);
        assert.match(await step("finalize", "--wait", "--timeout", "60"), /mixed_transition -> active/);
        // The HTTP attempt parked at version 7 keeps its callback: the function's completion resolves it.
        const done = await client.completeExternal(String(cb.id), { ok: 1 });
        assert.equal(done.state, "completed");
        // The available jobs ran, and so did the attempt whose runtime was gone (rescued, then retried).
        await waitFor(
          async () => {
            for (const [id, b] of before) {
              if (b.state === "available" || b.state === "running") {
                if ((await client.getJob(id))?.state !== "completed") return false;
              }
            }
            return true;
          },
          30_000,
          "the available and the rescued jobs completed",
        );
        const expected: Record<string, string> = {
          available: "completed",
          running: "completed",
          waiting_external: "completed",
          scheduled: "scheduled",
          retryable: "retryable",
          completed: "completed",
          failed: "failed",
          cancelled: "cancelled",
        };
        for (const [id, b] of before) {
          const j = await client.getJob(id);
          assert.ok(j, `job ${id} (${b.kind}) is still readable`);
          assert.equal(j.state, expected[b.state], `job ${id} (${b.kind}, ${b.state} at version 7)`);
        }
        // Every job is in exactly one place, and nothing unfinished is left in canonical. The fixture's nightly
        // schedule (03:00 UTC) fires once the worker's leader runs on any day after the fixture was made
        // after 03:00: that job is new, not one of the fixture's.
        const rows = await client.sql.unsafe(
          `select id, min(kind) as kind, count(*)::int as n
             from (select id, kind from svc.jobs union all select id, kind from svc_qs.jobs) x
            group by id order by id`,
        );
        assert.deepEqual(
          rows.filter((r) => !before.has(Number(r.id))).map((r) => r.kind).filter((k) =>
            k !== "fixture.cron"
          ),
          [],
          "no job but the fixture's and its schedule's",
        );
        assert.deepEqual(
          rows.map((r) => Number(r.id)).filter((id) => before.has(id)).sort((a, b) => a - b),
          [...before.keys()].sort((a, b) => a - b),
        );
        for (const r of rows) assert.equal(r.n, 1, `job ${r.id} is in one place`);
        const [left] = await client.sql.unsafe(
          `select count(*)::int as n from svc.jobs where state not in ('completed', 'failed', 'cancelled')`,
        );
        assert.equal(left.n, 0);
        for (const id of ran) assert.equal(ran.filter((x) => x === id).length, 1, `job ${id} ran once`);
        assert.equal(new Set(ran).size, 3, "the two available jobs and the rescued one ran");
        assert.equal((await client.storageStatus()).state, "active");
      } finally {
        await stop();
        await client.close();
      }
    }),
);

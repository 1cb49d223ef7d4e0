/**
 * The functions of `sql/` and the library version recorded with them (ADR 017): a migrate with nothing
 * changed re-creates nothing; one whose files differ drops what the previous one installed (a function
 * whose result type changed, one the files no longer have) and creates the files' functions in the same
 * transaction; a library older than the one that installed the functions neither migrates (exit 1,
 * naming both versions) nor starts a worker; the files are plain SQL that psql runs.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { createClient, SqlTooNewError } from "../../mod.ts";
import { DATABASE_URL, withSchema } from "../helpers/db.ts";
import { svcIn } from "../helpers/cli.ts";
import { startWorker } from "../helpers/worker.ts";
import { LIBRARY_VERSION } from "../../src/version.ts";
import { EXPECTED_SCHEMA_VERSION, MIGRATIONS } from "../../src/db/schema_version.ts";
import { sqlFiles } from "../../src/db/migrate.ts";

Deno.test("sql files: an unchanged migrate re-creates nothing; a changed one replaces what the last one installed", () =>
  withSchema(async (client, schema) => {
    const qs = `${schema}_qs`;
    const oid = async (fn: string) =>
      (await client.sql.unsafe(`select to_regprocedure($1)::oid::bigint as o`, [fn]))[0].o;
    const claim = await oid(`"${qs}".claim(text, integer, integer, text, jsonb, jsonb, bigint)`);
    assert.ok(claim, "the claim function exists");
    assert.deepEqual((await client.migrate()).applied, []);
    assert.equal(await oid(`"${qs}".claim(text, integer, integer, text, jsonb, jsonb, bigint)`), claim);

    // As an older library's files would have left them: slot_empty returning another type, and a function
    // the current files no longer have, both recorded as installed; the digest differs.
    await client.sql.unsafe(`drop function "${qs}".slot_empty(smallint)`);
    await client.sql.unsafe(
      `create function "${qs}".slot_empty(p_slot smallint) returns integer language sql as 'select 0'`,
    );
    await client.sql.unsafe(
      `create function "${qs}".retired(p integer) returns integer language sql as 'select p'`,
    );
    await client.sql.unsafe(
      `update "${schema}".sql_version set sql_digest = 'older',
              installed = installed || array[format('%I.retired(integer)', $1::text)]`,
      [qs],
    );
    assert.deepEqual((await client.migrate()).applied, []);
    const [r] = await client.sql.unsafe(
      `select pg_get_function_result(to_regprocedure($1)) as result, to_regprocedure($2) as retired`,
      [`"${qs}".slot_empty(smallint)`, `"${qs}".retired(integer)`],
    );
    assert.deepEqual([r.result, r.retired], ["boolean", null]);
    assert.notEqual(await oid(`"${qs}".claim(text, integer, integer, text, jsonb, jsonb, bigint)`), claim);
    const [v] = await client.sql.unsafe(`select library_version, sql_digest from "${schema}".sql_version`);
    assert.equal(v.library_version, LIBRARY_VERSION);
    assert.notEqual(v.sql_digest, "older");
  }));

Deno.test("sql files: an older library neither migrates over a newer one's functions nor starts a worker", () =>
  withSchema(async (client, schema) => {
    await client.sql.unsafe(`update "${schema}".sql_version set library_version = '99.1.0'`);
    const r = await svcIn(schema, ["migrate"]);
    assert.equal(r.code, 1, `${r.stdout} ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`installed by svc 99\\.1\\.0, newer than this svc ${LIBRARY_VERSION}`));
    await assert.rejects(() => client.migrate(), SqlTooNewError);
    await assert.rejects(() => startWorker(client, { handlers: {} }), SqlTooNewError);
    const [v] = await client.sql.unsafe(`select library_version from "${schema}".sql_version`);
    assert.equal(v.library_version, "99.1.0", "nothing was overwritten");
  }));

Deno.test("sql files: each file is plain SQL that psql runs as it is", async () => {
  // A database of its own with a default install (schema svc, queue storage in svc_qs, the name the files
  // use); psql, not svc, applies every file again, with search_path set to the svc schema.
  const db = `svc_psql_${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  const u = new URL(DATABASE_URL);
  u.pathname = `/${db}`;
  try {
    await admin.unsafe(`create database "${db}"`);
    const client = createClient({ databaseUrl: u.toString(), maxConnections: 1 });
    try {
      await client.migrate();
    } finally {
      await client.close();
    }
    const script = [
      "begin;",
      "set local search_path to svc, pg_catalog;",
      ...sqlFiles().map((f) => f.text),
      "commit;",
    ]
      .join("\n");
    const child = new Deno.Command("psql", {
      args: ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", u.toString(), "-f", "-"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(script));
    await w.close();
    const res = await child.output();
    assert.equal(res.code, 0, new TextDecoder().decode(res.stderr));
  } finally {
    await admin.unsafe(`drop database if exists "${db}" with (force)`);
    await admin.end();
  }
});

Deno.test("schema versions below the baseline: 8 and 9 (development states) are upgraded, 1 to 6 refused", () =>
  withSchema(async (client, schema) => {
    // Versions 8 and 9 had the baseline's tables (8 without attempt_progress), and functions without a
    // recorded library version.
    const at = async (version: number) => {
      await client.sql.unsafe(`delete from "${schema}".schema_migrations`);
      await client.sql.unsafe(
        `insert into "${schema}".schema_migrations (version, name) select v, 'older' from generate_series(1, $1) v`,
        [version],
      );
      await client.sql.unsafe(`drop table "${schema}".sql_version`);
    };
    for (const version of [9, 8]) {
      await at(version);
      if (version === 8) await client.sql.unsafe(`drop table "${schema}".attempt_progress`);
      const r = await client.migrate();
      assert.deepEqual([r.from, r.to, r.applied], [
        version,
        EXPECTED_SCHEMA_VERSION,
        MIGRATIONS.map((m) => m.version),
      ]);
      const [v] = await client.sql.unsafe(
        `select library_version, to_regclass($1) is not null as progress from "${schema}".sql_version`,
        [`"${schema}".attempt_progress`],
      );
      assert.deepEqual([v.library_version, v.progress], [LIBRARY_VERSION, true]);
      assert.ok((await client.enqueue("after.upgrade", {})).id > 0);
    }
    // A development state older than the older line's 7 is refused with what to do.
    await client.sql.unsafe(`delete from "${schema}".schema_migrations where version > 5`);
    const cli = await svcIn(schema, ["migrate"]);
    assert.equal(cli.code, 1, `${cli.stdout} ${cli.stderr}`);
    assert.match(cli.stderr, /schema version 5 is a development state .* upgrades from version 7, 8 or 9/);
  }));

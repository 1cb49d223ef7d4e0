/** `svc health`: exit codes, text and JSON, the connect timeout, and fleet counts with 0, 1, 2 workers. */
import assert from "node:assert/strict";
import { freshSchema, POOLED, TEST_ENGINE, TEST_TRANSITION, testClient, waitFor } from "../helpers/db.ts";
import { type CliRun, svc, svcIn } from "../helpers/cli.ts";
import { closedPort } from "../helpers/http.ts";
import { type Proc, spawnFixture } from "../helpers/process.ts";
import { EXPECTED_SCHEMA_VERSION } from "../../src/db/schema_version.ts";

const oneErrorLine = (r: CliRun): string => {
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line on stderr, got ${JSON.stringify(r.stderr)}`);
  assert.match(lines[0], /^error: /);
  return lines[0];
};

Deno.test("svc health: a ready database exits 0, text and --json", async () => {
  const { schema, drop } = await testClient();
  try {
    const text = await svcIn(schema, ["health"]);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(
      text.stdout,
      [
        "ready: yes",
        "postgres: connected",
        `schema version: ${EXPECTED_SCHEMA_VERSION} (binary expects >= ${EXPECTED_SCHEMA_VERSION})`,
        `storage: ${TEST_ENGINE}`,
        "live runtimes: 0 (0 unhealthy)",
        // The runner's --pooler pass: the command's URL goes through PgBouncer (SERVICE_POOLER=transaction).
        ...(POOLED ? ["connection: through a transaction pooler"] : []),
        "",
      ].join("\n"),
    );
    assert.equal(text.stderr, "");

    const json = await svc(["health", "--json", "--schema", schema]);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout), {
      ready: true,
      postgres: "connected",
      schema_version: EXPECTED_SCHEMA_VERSION,
      expected_schema_version: EXPECTED_SCHEMA_VERSION,
      storage: TEST_ENGINE,
      storage_transition: TEST_TRANSITION,
      live_runtimes: 0,
      unhealthy_runtimes: 0,
      pooler: POOLED ? "transaction" : "none",
    });
  } finally {
    await drop();
  }
});

Deno.test("svc health: an unmigrated schema exits 1 with the reason naming `svc migrate`", async () => {
  const schema = freshSchema("unmig");
  const text = await svcIn(schema, ["health"]);
  assert.equal(text.code, 1);
  assert.match(text.stdout, /^ready: no$/m);
  assert.match(text.stdout, /^schema version: none \(not installed\)/m);
  assert.match(oneErrorLine(text), /svc migrate/);

  const json = await svcIn(schema, ["health", "--json"]);
  assert.equal(json.code, 1);
  const h = JSON.parse(json.stdout);
  assert.equal(h.ready, false);
  assert.equal(h.postgres, "connected");
  assert.equal(h.schema_version, null);
  assert.equal(h.expected_schema_version, EXPECTED_SCHEMA_VERSION);
  assert.match(h.reason, /svc migrate/);

  // An older schema is not ready either.
  const { client, drop } = await testClient({ schema });
  try {
    // (without the last migration's record: the version before)
    await client.sql.unsafe(
      `delete from "${schema}".schema_migrations where version = ${EXPECTED_SCHEMA_VERSION}`,
    );
    const old = await svcIn(schema, ["health", "--json"]);
    assert.equal(old.code, 1);
    assert.equal(JSON.parse(old.stdout).schema_version, EXPECTED_SCHEMA_VERSION - 1);
    assert.match(oneErrorLine(old), /older than .*svc migrate/);
  } finally {
    await drop();
  }
});

Deno.test("svc health: a closed port exits 1 at once; a silent server fails after the connect timeout", async () => {
  const url = `postgres://postgres@127.0.0.1:${closedPort()}/postgres`;
  const closed = await svc(["health", "--database-url", url]);
  assert.equal(closed.code, 1);
  assert.match(closed.stdout, /^ready: no\npostgres: unreachable\n/);
  assert.match(
    closed.stdout,
    /^live runtimes: 0 \(not counted: the database was not reached\)$/m,
    "as --json says: 0",
  );
  assert.doesNotMatch(closed.stdout, /ECONNREFUSED|reason/, "the reason is printed once, as the error line");
  assert.match(oneErrorLine(closed), /database unreachable .*ECONNREFUSED.*check the database URL/);
  const json = await svc(["--database-url", url, "health", "--json"]);
  assert.equal(json.code, 1);
  assert.equal(JSON.parse(json.stdout).postgres, "unreachable");
  assert.equal(JSON.parse(json.stdout).ready, false);

  // A server that accepts the TCP connection and never answers: the 5 s default, then --connect-timeout.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) held.push(c);
  })();
  try {
    const silent = `postgres://postgres@127.0.0.1:${(listener.addr as Deno.NetAddr).port}/postgres`;
    const [slow, fast, silentJson] = await Promise.all([
      svc(["health", "--database-url", silent]),
      svc(["health", "--database-url", silent, "--connect-timeout", "1"]),
      svc(["health", "--database-url", silent, "--connect-timeout", "1", "--json"]),
    ]);
    assert.equal(slow.code, 1);
    assert.ok(slow.ms >= 4_500 && slow.ms < 12_000, `default connect timeout is 5 s, took ${slow.ms} ms`);
    assert.match(oneErrorLine(slow), /no PostgreSQL answered at .* within 5 s.*--connect-timeout/);
    assert.equal(JSON.parse(silentJson.stdout).postgres, "unreachable");
    assert.equal(fast.code, 1);
    assert.match(oneErrorLine(fast), /within 1 s/);
    assert.ok(fast.ms < slow.ms - 2_000, `--connect-timeout 1 took ${fast.ms} ms, the default ${slow.ms} ms`);
  } finally {
    listener.close();
    held.forEach((c) => c.close());
    await accepting.catch(() => {});
  }
});

Deno.test("svc health: usage errors exit 2", async () => {
  const none = await svc(["health"], { DATABASE_URL: "" });
  assert.equal(none.code, 2);
  assert.match(oneErrorLine(none), /--database-url .* or set DATABASE_URL/);
  const bad = await svc(["health", "--bogus"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unknown option '--bogus'/);
  const help = await svc(["health", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Exit codes: 0 ready, 1 unreachable or not migrated, 2 usage error/);
});

Deno.test("svc health: live and unhealthy runtime counts with 0, 1 and 2 worker processes", async () => {
  const { schema, drop } = await testClient();
  const procs: Proc[] = [];
  const counts = async () => {
    const r = await svcIn(schema, ["health", "--json"]);
    assert.equal(r.code, 0, `zero or more workers, one unhealthy or not, the cluster is ready: ${r.stderr}`);
    const h = JSON.parse(r.stdout);
    return `${h.live_runtimes}/${h.unhealthy_runtimes}`;
  };
  try {
    assert.equal(await counts(), "0/0");

    procs.push(spawnFixture("ops_worker.ts", schema));
    await procs[0].waitLine(/^started /);
    await waitFor(async () => (await counts()) === "1/0", 15_000, "1 live, 0 unhealthy");
    const text = await svcIn(schema, ["health"]);
    assert.match(text.stdout, /^live runtimes: 1 \(0 unhealthy\)$/m);

    // The second process's claim loop hangs: it reports itself not ready through its heartbeat.
    procs.push(spawnFixture("ops_worker.ts", schema, { STUCK: "1" }));
    await procs[1].waitLine(/^started /);
    await waitFor(async () => (await counts()) === "2/1", 15_000, "2 live, 1 unhealthy");
    // The text form of the same: read until a heartbeat of the stuck process has said it again (a report
    // between two of its heartbeats was once read as healthy in CI).
    const text2 = (await waitFor(
      async () => {
        const t = await svcIn(schema, ["health"]);
        return /^live runtimes: 2 \(1 unhealthy\)$/m.test(t.stdout) ? t : null;
      },
      15_000,
      "the text form: 2 live, 1 unhealthy",
    ))!;
    assert.equal(text2.code, 0);
    assert.match(text2.stdout, /^ready: yes$/m);

    // A graceful shutdown removes the runtime row.
    await procs[0].kill("SIGTERM");
    await waitFor(async () => (await counts()) === "1/1", 15_000, "1 live, 1 unhealthy");
  } finally {
    await Promise.all(procs.map((p) => p.kill()));
    await drop();
  }
});

/**
 * CLI rules: every bad option value is a usage error (exit 2) found before connecting; `migrate
 * --status` exits 1 while migrations are pending; pausing or resuming an unknown queue is refused
 * (CLI exit 1, REST 404, client not-found error) unless asked to create it.
 */
import assert from "node:assert/strict";
import { svc, svcIn } from "../helpers/cli.ts";
import { closedPort, post, serveTest } from "../helpers/http.ts";
import { dropSchema, freshSchema, TEST_ENGINE, testClient } from "../helpers/db.ts";
import { adminFixture } from "../helpers/admin.ts";
import { QueueNotFoundError } from "../../mod.ts";

function oneErrorLine(r: { stderr: string }): string {
  const lines = r.stderr.trim().split("\n").filter((l) => !l.startsWith("(run with --help"));
  assert.equal(lines.length, 1, `one error line: ${r.stderr}`);
  return lines[0];
}

/** Runs the calls 6 at a time (each is a process), in order. */
async function inBatches<T>(calls: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < calls.length; i += 6) {
    out.push(...await Promise.all(calls.slice(i, i + 6).map((c) => c())));
  }
  return out;
}

Deno.test("every bad option value exits 2 before connecting", async () => {
  // A closed port: anything that tried to connect would exit 1 instead.
  const env = { DATABASE_URL: `postgres://postgres@127.0.0.1:${closedPort()}/postgres` };
  const cases: string[][] = [
    ["queue", "pause", "bad name!"],
    ["queue", "resume", ""],
    ["queue", "pause", "q".repeat(49)],
    ["job", "enqueue", "k", "--queue", "bad!"],
    ["job", "enqueue", ""],
    ["job", "enqueue", "k", "--run-at", "2026-02-31T00:00:00Z"],
    ["job", "enqueue", "k", "--run-at", "0000-01-01T00:00:00Z"],
    ["job", "enqueue", "k", "--args", '{"n":9007199254740993}'],
    ["job", "enqueue", "k", "--args", '{"s":"\\u0000"}'],
    ["job", "list", "--queue", "bad queue"],
    ["job", "list", "--cursor", "garbage"],
    ["job", "list", "--cursor", btoa("id:99999999999999999999")],
    ["job", "retry-failed", "--queue", "bad!"],
    ["cron", "add", "bad name", "--schedule", "0 3 * * *", "--kind", "k"],
    ["cron", "add", "c", "--schedule", "0 3 * * *", "--kind", "k", "--queue", "bad!"],
    ["cron", "trigger", "bad name"],
    ["cron", "pause", "bad/name"],
    ["cron", "resume", "bad name"],
    ["cron", "remove", "bad name"],
    ["--schema", "Bad-Schema", "job", "list"],
    ["job", "list", "--schema", "1bad"],
    ["--database-url", "not a url", "job", "list"],
    ["migrate", "--database-url", "http://example.com/"],
    ["job", "list", "--connect-timeout", "0"],
    ["serve", "--callback-hmac-secret", "xyz"],
    ["serve", "--auth-token", ""],
    ["callbacks", "serve", "--callback-hmac-secret", "abc123"],
  ];
  const runs = await inBatches([
    ...cases.map((c) => () => svc(c, env)),
    () => svc(["job", "list"], { ...env, SERVICE_SCHEMA: "Bad" }),
    () => svc(["job", "list"], { DATABASE_URL: "mysql://x" }),
    () => svc(["callbacks", "serve"], { ...env, SERVICE_CALLBACK_HMAC_SECRET: "g".repeat(64) }),
  ]);
  runs.forEach((r, i) => {
    const what = (cases[i] ?? ["(environment)", String(i)]).join(" ");
    assert.equal(r.code, 2, `${what}: exit ${r.code}, ${r.stderr}`);
    assert.match(r.stderr, /error/, what);
  });
  // Values that may be secrets are not repeated in the message.
  const url = await svc(["--database-url", "mysql://user:pw-do-not-print@host/db", "job", "list"], env);
  assert.equal(url.code, 2);
  assert.ok(!url.stderr.includes("pw-do-not-print"), url.stderr);
  const token = await svc(["serve", "--auth-token", "do-not-print this"], env);
  assert.equal(token.code, 2);
  assert.ok(!token.stderr.includes("do-not-print"), token.stderr);
});

Deno.test("svc migrate --status exits 1 while migrations are pending, 0 when current or newer", async () => {
  const schema = freshSchema("mig");
  try {
    const pending = await svcIn(schema, ["migrate", "--status"]);
    assert.equal(pending.code, 1, pending.stderr);
    assert.match(pending.stdout, /migrations pending/);
    assert.match(oneErrorLine(pending), /^error: migrations pending.*svc migrate/);
    const pendingJson = await svcIn(schema, ["migrate", "--status", "--json"]);
    assert.equal(pendingJson.code, 1);
    assert.equal(JSON.parse(pendingJson.stdout).up_to_date, false);

    assert.equal((await svcIn(schema, ["migrate", "--engine", TEST_ENGINE])).code, 0);
    const current = await svcIn(schema, ["migrate", "--status"]);
    assert.equal(current.code, 0, current.stderr);
    assert.match(current.stdout, /up to date/);

    const { client, drop } = await testClient({ schema });
    try {
      await client.sql.unsafe(
        `insert into "${schema}".schema_migrations (version, name) values (999, 'future')`,
      );
      const newer = await svcIn(schema, ["migrate", "--status", "--json"]);
      assert.equal(newer.code, 0, newer.stderr);
      assert.equal(JSON.parse(newer.stdout).current_version, 999);
    } finally {
      await drop();
    }
  } finally {
    await dropSchema(schema);
  }
});

Deno.test("pausing or resuming an unknown queue is refused unless created: CLI, REST and client", async () => {
  const f = await adminFixture();
  const server = serveTest(f.app.fetch);
  const { client, schema } = f;
  const paused = async (name: string) => (await client.listQueues()).find((q) => q.name === name)?.paused;
  try {
    // CLI: exit 1 naming --create; nothing created.
    const refused = await svcIn(schema, ["queue", "pause", "nosuchqueue"]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(oneErrorLine(refused), /^error: queue "nosuchqueue" .*not found.*svc queue list.*--create/);
    assert.equal((await svcIn(schema, ["queue", "resume", "nosuchqueue"])).code, 1);
    assert.equal(await paused("nosuchqueue"), undefined, "no queue was created");
    const created = await svcIn(schema, ["queue", "pause", "nosuchqueue", "--create"]);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(await paused("nosuchqueue"), true);
    assert.equal((await svcIn(schema, ["queue", "resume", "nosuchqueue"])).code, 0, "known now (its row)");

    // A queue with a job, or served by a live runtime, is known.
    await client.enqueue("k", {}, { queue: "withjob" });
    assert.equal((await svcIn(schema, ["queue", "pause", "withjob"])).code, 0);
    await client.engine.upsertRuntime({
      id: "rt:1:x",
      hostname: "rt",
      pid: 1,
      queues: ["served"],
      ready: true,
      leader: false,
      health: {},
    });
    assert.equal(await client.engine.queueKnown("served"), true);
    assert.equal(await client.engine.queueKnown("nobody"), false);
    await client.pauseQueue("served");
    assert.equal(await paused("served"), true);

    // Client: a not-found error unless { create: true }.
    await assert.rejects(() => client.pauseQueue("ghost"), (e: Error) => {
      assert.ok(e instanceof QueueNotFoundError, String(e));
      assert.equal((e as QueueNotFoundError).code, "not_found");
      return true;
    });
    await assert.rejects(() => client.resumeQueue("ghost"), QueueNotFoundError);
    await client.pauseQueue("ghost", { create: true });
    assert.equal(await paused("ghost"), true);

    // REST: 404 not_found unless ?create=true or {"create": true}.
    const nf = await post(`${server.url}/api/queues/phantom/pause`);
    assert.equal(nf.status, 404, JSON.stringify(nf.body));
    assert.equal(nf.body.code, "not_found");
    assert.equal((await post(`${server.url}/api/queues/phantom/resume`)).status, 404);
    assert.equal(await paused("phantom"), undefined);
    const viaQuery = await post(`${server.url}/api/queues/phantom/pause?create=true`);
    assert.equal(viaQuery.status, 200, JSON.stringify(viaQuery.body));
    assert.equal(viaQuery.body.queue.paused, true);
    const viaBody = await post(`${server.url}/api/queues/phantom2/pause`, { create: true });
    assert.equal(viaBody.status, 200, JSON.stringify(viaBody.body));
    assert.equal((await post(`${server.url}/api/queues/phantom3/pause?create=maybe`)).status, 400);
    assert.equal((await post(`${server.url}/api/queues/phantom3/pause`, { create: "yes" })).status, 400);
  } finally {
    await server.close();
    await f.drop();
  }
});

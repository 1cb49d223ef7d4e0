import assert from "node:assert/strict";
import postgres from "postgres";
import { countJobs, DATABASE_URL, POOLED, testClient } from "../helpers/db.ts";
import { UniqueConflictError, ValidationError } from "../../mod.ts";

Deno.test("enqueue: every invalid option gets a clear error and writes nothing", async () => {
  const { client, drop } = await testClient();
  try {
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["priority 0", () => client.enqueue("k", {}, { priority: 0 }), /priority must be an integer from 1/],
      ["priority 5", () => client.enqueue("k", {}, { priority: 5 }), /priority/],
      ["priority 1.5", () => client.enqueue("k", {}, { priority: 1.5 }), /priority/],
      [
        "max_attempts 0",
        () => client.enqueue("k", {}, { maxAttempts: 0 }),
        /maxAttempts must be an integer from 1 to 1000/,
      ],
      ["max_attempts 1001", () => client.enqueue("k", {}, { maxAttempts: 1001 }), /maxAttempts/],
      [
        "args array",
        () => client.enqueue("k", [1, 2] as unknown as Record<string, unknown>),
        /args of k must be a JSON object/,
      ],
      ["args string", () => client.enqueue("k", "x" as unknown as Record<string, unknown>), /JSON object/],
      ["args null", () => client.enqueue("k", null as unknown as Record<string, unknown>), /JSON object/],
      ["queue spaces", () => client.enqueue("k", {}, { queue: "bad queue" }), /invalid queue name/],
      ["queue too long", () => client.enqueue("k", {}, { queue: "q".repeat(49) }), /1 to 48 characters/],
      ["queue empty", () => client.enqueue("k", {}, { queue: "" }), /invalid queue name/],
      ["empty kind", () => client.enqueue("", {}), /kind must be a non-empty string/],
      ["bad runAt", () => client.enqueue("k", {}, { runAt: new Date("nope") }), /runAt must be a valid Date/],
      [
        "tags",
        () => client.enqueue("k", {}, { tags: [1 as unknown as string] }),
        /tags must be an array of strings/,
      ],
      [
        "metadata",
        () => client.enqueue("k", {}, { metadata: [] as unknown as Record<string, unknown> }),
        /metadata/,
      ],
      [
        "batch with one bad",
        () => client.enqueueMany([{ kind: "ok" }, { kind: "k", priority: 9 }]),
        /priority/,
      ],
    ];
    for (const [name, fn, re] of cases) {
      await assert.rejects(fn, (e: Error) => {
        assert.ok(e instanceof ValidationError, `${name}: expected ValidationError, got ${e}`);
        assert.match(e.message, re, name);
        return true;
      });
    }
    assert.equal(await countJobs(client), 0);
  } finally {
    await drop();
  }
});

Deno.test("enqueue: defaults, enqueueMany keeps input order, scheduled vs available", async () => {
  const { client, drop } = await testClient();
  try {
    const j = await client.enqueue("send", { to: "a" });
    assert.equal(j.state, "available");
    assert.equal(j.queue, "default");
    assert.equal(j.priority, 2);
    assert.equal(j.maxAttempts, 25);
    assert.equal(j.attempt, 0);
    assert.deepEqual(j.args, { to: "a" });
    const many = await client.enqueueMany([
      { kind: "a", args: { i: 1 } },
      {
        kind: "b",
        args: { i: 2 },
        runAt: new Date(Date.now() + 60_000),
        queue: "other",
        priority: 4,
        tags: ["x"],
      },
      { kind: "c", args: { i: 3 }, metadata: { m: 1 } },
    ]);
    assert.deepEqual(many.map((m) => m.kind), ["a", "b", "c"]);
    assert.deepEqual(many.map((m) => m.state), ["available", "scheduled", "available"]);
    assert.equal(many[1].queue, "other");
    assert.deepEqual(many[1].tags, ["x"]);
    assert.deepEqual(many[2].metadata, { m: 1 });
    assert.equal(await countJobs(client), 4);
  } finally {
    await drop();
  }
});

Deno.test("enqueueMany: each job it answers is the job the database stored (the answer is built from the input)", async () => {
  const { client, drop } = await testClient();
  try {
    const [held] = await client.enqueueMany([{ kind: "k", args: { held: true }, unique: { byArgs: true } }]);
    const past = new Date(Date.now() - 60_000);
    const later = new Date(Date.now() + 3_600_000);
    const jobs = await client.enqueueMany([
      { kind: "a" },
      {
        kind: "b",
        args: { n: 1, s: 'quote " backslash \\ unicode é' },
        runAt: past,
        queue: "q2",
        priority: 1,
      },
      {
        kind: "c",
        args: { deep: [{ a: [1, 2] }] },
        runAt: later,
        tags: ["t1", "t,2"],
        metadata: { m: { n: 1 } },
      },
      { kind: "k", args: { held: true }, unique: { byArgs: true } },
      { kind: "d", maxAttempts: 3, unique: { byArgs: true, periodMs: 60_000 } },
      { kind: "e", args: { same: 1 }, unique: { byArgs: true, byQueue: true } },
      { kind: "e", args: { same: 1 }, unique: { byArgs: true, byQueue: true } },
    ]);
    assert.equal(jobs.length, 7);
    assert.equal(jobs[3].duplicate, true);
    assert.equal(jobs[3].id, held.id);
    assert.equal(jobs[6].duplicate, true);
    assert.equal(jobs[6].id, jobs[5].id);
    assert.deepEqual(jobs.map((j) => j.state), [
      "available",
      "available",
      "scheduled",
      "available",
      "available",
      "available",
      "available",
    ]);
    assert.equal(jobs[1].runAt.getTime(), past.getTime());
    for (const j of jobs) {
      const stored = await client.getJob(j.id);
      assert.ok(stored, `job ${j.id} is stored`);
      const { duplicate: _, ...answered } = j as typeof j & { duplicate?: boolean };
      assert.deepEqual(answered, stored, `job ${j.id} (${j.kind}) as answered and as stored`);
    }
  } finally {
    await drop();
  }
});

Deno.test("unique jobs: duplicate returned or UniqueConflictError; a finished job frees the key", async () => {
  const { client, drop } = await testClient();
  try {
    const a = await client.enqueue("u", { x: 1, y: 2 }, { unique: {} });
    const b = await client.enqueue("u", { y: 2, x: 1 }, { unique: {} }); // key order does not matter
    assert.equal(b.id, a.id);
    assert.equal(b.duplicate, true);
    assert.equal(a.duplicate, undefined);
    await assert.rejects(
      () => client.enqueue("u", { x: 1, y: 2 }, { unique: { onConflict: "error" } }),
      (e: Error) => e instanceof UniqueConflictError && e.existingJobId === a.id,
    );
    const other = await client.enqueue("u", { x: 2 }, { unique: {} });
    assert.notEqual(other.id, a.id);
    const byKind = await client.enqueue("u", { x: 3 }, { unique: { byArgs: false } });
    const byKind2 = await client.enqueue("u", { x: 4 }, { unique: { byArgs: false } });
    assert.equal(byKind2.id, byKind.id);
    const q1 = await client.enqueue("u", { z: 1 }, { queue: "q1", unique: { byQueue: true } });
    const q2 = await client.enqueue("u", { z: 1 }, { queue: "q2", unique: { byQueue: true } });
    assert.notEqual(q1.id, q2.id);
    // In a batch: the second copy is a duplicate of the first.
    const batch = await client.enqueueMany([
      { kind: "v", args: { n: 1 }, unique: {} },
      { kind: "v", args: { n: 1 }, unique: {} },
      { kind: "w" },
    ]);
    assert.equal(batch[1].id, batch[0].id);
    assert.equal(batch[1].duplicate, true);
    assert.equal(batch[2].kind, "w");
    // Cancel the first: the key is free again.
    await client.cancel(a.id);
    const c = await client.enqueue("u", { x: 1, y: 2 }, { unique: {} });
    assert.notEqual(c.id, a.id);
    assert.equal(c.duplicate, undefined);
    assert.equal(await countJobs(client), 8);
  } finally {
    await drop();
  }
});

Deno.test("transactional enqueue: client.transaction and the caller's own postgres.js transaction", async () => {
  const { client, drop, schema } = await testClient();
  // Through a transaction pooler a plain connection must not keep named statements (they live on one server).
  const own = postgres(DATABASE_URL, { max: 1, onnotice: () => {}, prepare: !POOLED });
  try {
    await assert.rejects(
      client.transaction(async (tx) => {
        await tx.enqueue("k", { n: 1 });
        await tx.enqueueMany([{ kind: "k", args: { n: 2 } }]);
        throw new Error("roll back");
      }),
      /roll back/,
    );
    assert.equal(await countJobs(client), 0, "a rolled-back transaction leaves no job");
    await client.transaction(async (tx) => {
      await tx.enqueue("k", { n: 3 });
      await tx.sql.unsafe(`select 1`);
    });
    assert.equal(await countJobs(client), 1);

    await own.unsafe(`create table "${schema}".orders (id int)`);
    await assert.rejects(
      own.begin(async (tx) => {
        await tx.unsafe(`insert into "${schema}".orders values (1)`);
        await client.enqueue("k", { n: 4 }, { tx });
        await client.enqueueMany([{ kind: "k" }], { tx });
        throw new Error("abort");
      }),
      /abort/,
    );
    assert.equal(await countJobs(client), 1);
    await own.begin(async (tx) => {
      await tx.unsafe(`insert into "${schema}".orders values (2)`);
      await client.enqueue("k", { n: 5 }, { tx });
    });
    assert.equal(await countJobs(client), 2);
  } finally {
    await own.end();
    await drop();
  }
});

async function psql(script: string): Promise<{ code: number; out: string; err: string }> {
  const out = await new Deno.Command("psql", {
    args: [DATABASE_URL, "-v", "ON_ERROR_STOP=1", "-At", "-c", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, out: d.decode(out.stdout), err: d.decode(out.stderr) };
}

Deno.test("SQL function svc.enqueue from plain psql: committed, rolled back, invalid options", async () => {
  const { client, drop, schema } = await testClient();
  try {
    const ok = await psql(
      `begin; select id from "${schema}".enqueue('report', '{"n": 1}', '{"queue": "psql", "priority": 1, "tags": ["a"]}'); commit;`,
    );
    assert.equal(ok.code, 0, ok.err);
    const id = Number(ok.out.trim().split("\n").find((l) => /^\d+$/.test(l)));
    const job = await client.getJob(id);
    assert.equal(job?.kind, "report");
    assert.equal(job?.queue, "psql");
    assert.equal(job?.priority, 1);
    assert.deepEqual(job?.tags, ["a"]);

    const rb = await psql(`begin; select id from "${schema}".enqueue('report', '{}', '{}'); rollback;`);
    assert.equal(rb.code, 0, rb.err);
    assert.equal(await countJobs(client), 1);

    for (
      const [opts, re] of [
        [`'{}', '{"priority": 7}'`, /priority must be 1/],
        [`'[]', '{}'`, /args must be a JSON object/],
        [`'{}', '{"max_attempts": 0}'`, /max_attempts must be 1 to 1000/],
        [`'{}', '{"queue": "no spaces"}'`, /queue name/],
      ] as const
    ) {
      const bad = await psql(`select "${schema}".enqueue('report', ${opts})`);
      assert.notEqual(bad.code, 0);
      assert.match(bad.err, re);
    }
    const uniq1 = await psql(`select id from "${schema}".enqueue('u', '{}', '{"unique_key": "k1"}')`);
    const uniq2 = await psql(`select id from "${schema}".enqueue('u', '{}', '{"unique_key": "k1"}')`);
    assert.equal(uniq1.out.trim(), uniq2.out.trim());
    assert.equal(await countJobs(client), 2);
  } finally {
    await drop();
  }
});

Deno.test("migrations: concurrent migrate is safe; a newer schema is refused by migrate", async () => {
  const { client, drop, schema } = await testClient();
  try {
    const { createClient, SchemaTooNewError } = await import("../../mod.ts");
    const others = [1, 2, 3].map(() =>
      createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 1 })
    );
    const results = await Promise.all(others.map((c) => c.migrate()));
    assert.ok(results.every((r) => r.applied.length === 0));
    await Promise.all(others.map((c) => c.close()));
    const { EXPECTED_SCHEMA_VERSION } = await import("../../mod.ts");
    assert.deepEqual(await client.schemaStatus(), {
      current: EXPECTED_SCHEMA_VERSION,
      expected: EXPECTED_SCHEMA_VERSION,
    });
    await client.sql.unsafe(
      `insert into "${schema}".schema_migrations (version, name) values (99, 'future')`,
    );
    await assert.rejects(
      () => client.migrate(),
      (e: Error) => e instanceof SchemaTooNewError && /newer/.test(e.message),
    );
  } finally {
    await drop();
  }
});

Deno.test("migrations: two first-time migrations of one schema at once both succeed", async () => {
  const { createClient } = await import("../../mod.ts");
  const { freshSchema, dropSchema } = await import("../helpers/db.ts");
  const schema = freshSchema("mig");
  const cs = [1, 2].map(() => createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 1 }));
  try {
    const rs = await Promise.all(cs.map((c) => c.migrate()));
    const { MIGRATIONS } = await import("../../src/db/schema_version.ts");
    assert.deepEqual(
      rs.map((r) => r.applied.length).sort(),
      [0, MIGRATIONS.length],
      "one applies all, the other none",
    );
  } finally {
    await Promise.all(cs.map((c) => c.close()));
    await dropSchema(schema);
  }
});

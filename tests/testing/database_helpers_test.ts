/**
 * The helpers of `@svc/queue/testing` that use the database: `assertEnqueued` (committed jobs, and inside
 * a transaction before it commits) and `drain` (a worker until the queues are empty), on the storage
 * engine of the run.
 */
import assert from "node:assert/strict";
import { AssertionError } from "node:assert";
import { testClient } from "../helpers/db.ts";
import { assertEnqueued, drain } from "../../testing.ts";
import { createClient, snooze, type Task, TerminalError } from "../../mod.ts";

Deno.test("assertEnqueued: matches kind, args in part and options; lists what it found when it fails", async () => {
  const { client, drop } = await testClient();
  try {
    await client.enqueue("send_email", { to: "a@example.com", template: { name: "welcome", lang: "en" } }, {
      queue: "mail",
      priority: 1,
      tags: ["signup"],
      metadata: { source: "web" },
    });
    await client.enqueue("send_email", { to: "b@example.com" });
    const [job] = await assertEnqueued(client, "send_email", {
      args: { template: { name: "welcome" } },
      queue: "mail",
      priority: 1,
      tags: ["signup"],
      metadata: { source: "web" },
      state: "available",
    });
    assert.equal(job.args.to, "a@example.com");
    assert.equal((await assertEnqueued(client, "send_email")).length, 2);
    await assertEnqueued(client, "send_email", { count: 2 });
    await assertEnqueued(client, "resize", { count: 0 });

    const err = await assertEnqueued(client, "send_email", { args: { to: "c@example.com" } }).then(
      () => assert.fail("no job matches"),
      (e) => e,
    );
    assert.ok(err instanceof AssertionError);
    assert.match(
      err.message,
      /^expected a job of kind send_email matching \{"args":\{"to":"c@example.com"\}\}, found 0;/,
    );
    assert.match(err.message, /args \{"to":"b@example.com"\}/, "it lists the kind's jobs");
    await assert.rejects(
      assertEnqueued(client, "send_email", { count: 1 }),
      /expected 1 jobs of kind send_email/,
    );
    await assert.rejects(assertEnqueued(client, "resize"), /there are no resize jobs/);
    await assert.rejects(
      assertEnqueued(client, "send_email", { args: { to: ["a@example.com"] } }),
      AssertionError,
    );
  } finally {
    await drop();
  }
});

Deno.test("assertEnqueued: inside a transaction it sees the jobs the transaction enqueued before commit", async () => {
  const { client, drop } = await testClient();
  try {
    // client.transaction's tx: the job is there inside, and gone after the rollback.
    await assert.rejects(
      client.transaction(async (tx) => {
        await tx.enqueue("welcome", { user: 1 });
        await assertEnqueued(client, "welcome", { tx, args: { user: 1 } });
        throw new Error("roll back");
      }),
      /roll back/,
    );
    await assertEnqueued(client, "welcome", { count: 0 });
    // A postgres.js transaction of the caller's own, as enqueue's tx option takes it.
    await client.sql.begin(async (sql) => {
      await client.enqueue("welcome", { user: 2 }, { tx: sql });
      await assertEnqueued(client, "welcome", { tx: sql, args: { user: 2 } });
      await assertEnqueued(client, "welcome", { count: 0 }); // not committed: other sessions see nothing
    });
    await assertEnqueued(client, "welcome", { count: 1, args: { user: 2 } });
  } finally {
    await drop();
  }
});

type Tasks = {
  signup: { user: number };
  welcome: Task<{ user: number }, { sent: boolean }>;
  broken: Record<string, never>;
  flaky: Record<string, never>;
  nap: Record<string, never>;
};

Deno.test("drain: runs the queues until empty (follow-ups included) and returns each job as it ended", async () => {
  const { client: untyped, drop } = await testClient();
  const client = createClient<Tasks>({ sql: untyped.sql, schema: untyped.schema });
  try {
    const signup = await client.enqueue("signup", { user: 1 });
    const broken = await client.enqueue("broken", {});
    const flaky = await client.enqueue("flaky", {});
    const nap = await client.enqueue("nap", {});
    const jobs = await drain(client, {
      handlers: {
        signup: async (job, ctx) => {
          await ctx.enqueue("welcome", { user: job.args.user });
          return null;
        },
        welcome: () => ({ sent: true }),
        broken: () => {
          throw new TerminalError("broken for good");
        },
        flaky: {
          handler: () => {
            throw new Error("try again");
          },
          backoff: () => 60_000,
        },
        nap: () => snooze(60_000),
      },
    });
    const byKind = Object.fromEntries(jobs.map((j) => [j.kind, j]));
    assert.deepEqual(jobs.map((j) => j.kind).sort(), ["broken", "flaky", "nap", "signup", "welcome"]);
    assert.deepEqual(jobs.map((j) => j.id), [...jobs.map((j) => j.id)].sort((a, b) => a - b), "by id");
    assert.equal(byKind.signup.id, signup.id);
    assert.equal(byKind.signup.state, "completed");
    assert.deepEqual([byKind.welcome.state, byKind.welcome.result], ["completed", { sent: true }]);
    assert.deepEqual([byKind.broken.id, byKind.broken.state], [broken.id, "failed"]);
    assert.deepEqual(
      [byKind.flaky.id, byKind.flaky.state],
      [flaky.id, "retryable"],
      "a retry due later is left",
    );
    assert.deepEqual([byKind.nap.id, byKind.nap.state], [nap.id, "scheduled"]);
    assert.deepEqual(await drain(client, { handlers: {} }), [], "nothing left to run");
  } finally {
    await drop();
  }
});

Deno.test("drain: gives up after its timeout, with the worker stopped", async () => {
  const { client, drop } = await testClient();
  try {
    await client.enqueue("stuck", {});
    const started = Date.now();
    await assert.rejects(
      drain(client, {
        timeout: 500,
        handlers: {
          stuck: (_job, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", reject)),
        },
      }),
      /drain: the queues default were not drained within 500 ms/,
    );
    assert.ok(Date.now() - started < 10_000);
    await assert.rejects(drain(client, { queues: [] }), /queues must be a non-empty array/);
  } finally {
    await drop();
  }
});

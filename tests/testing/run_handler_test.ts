/**
 * `runHandler` of `@svc/queue/testing`: a handler run once without a database, its outcome mapped to the
 * state the worker would leave (as tests/worker/worker_test.ts checks the worker itself does), and what
 * stands in for the database (follow-up jobs, log lines, callbacks).
 */
import assert from "node:assert/strict";
import { runHandler } from "../../testing.ts";
import { crashingSchema, objectSchema } from "../helpers/schemas.ts";
import { recordingLogger } from "../helpers/fake_runtime.ts";
import { type Handler, type Job, snooze, type Task, TerminalError, ValidationError } from "../../mod.ts";

type Tasks = {
  resize: Task<{ url: string; width?: number }, { width: number }>;
  notify: { user: number };
};

const resize: Handler<Tasks["resize"], Tasks> = async (job, ctx) => {
  ctx.logger.info("resizing", job.args.url);
  if (job.args.url === "later") return snooze(5_000);
  if (job.args.url === "bad") throw new TerminalError("cannot read the image");
  if (job.args.url === "flaky") throw new Error("connection reset");
  await ctx.enqueue("notify", { user: 7 }, { queue: "mail" });
  return { width: job.args.width ?? 100 };
};

Deno.test("runHandler: each outcome as the worker would record it", async () => {
  const done = await runHandler(resize, { url: "https://example.com/a.png", width: 50 });
  assert.equal(done.state, "completed");
  const width: number | undefined = done.result?.width; // the declared result type
  assert.equal(width, 50);
  assert.deepEqual(done.job.args, { url: "https://example.com/a.png", width: 50 });
  assert.equal(done.job.attempt, 1);

  const later = await runHandler(resize, { url: "later" });
  assert.deepEqual([later.state, later.snoozeMs], ["scheduled", 5_000]);

  const bad = await runHandler(resize, { url: "bad" }, { attempt: 1 });
  assert.equal(bad.state, "failed");
  assert.ok(bad.error instanceof TerminalError);

  const flaky = await runHandler(resize, { url: "flaky" }, { attempt: 2 });
  assert.equal(flaky.state, "retryable");
  assert.equal((flaky.error as Error).message, "connection reset");
  assert.ok(
    flaky.retryDelayMs! >= 4_000 && flaky.retryDelayMs! <= 5_000,
    `default backoff: ${flaky.retryDelayMs}`,
  );

  const last = await runHandler(resize, { url: "flaky" }, { attempt: 3, maxAttempts: 3 });
  assert.equal(last.state, "failed", "a throw on the last attempt fails the job");

  // The entry's own options apply: its maxAttempts caps the job's, its backoff gives the delay.
  const entry = { handler: resize, maxAttempts: 2, backoff: (n: number) => n * 1000 };
  assert.equal((await runHandler(entry, { url: "flaky" }, { attempt: 1 })).retryDelayMs, 1000);
  assert.equal((await runHandler(entry, { url: "flaky" }, { attempt: 2 })).state, "failed");

  const unstorable = await runHandler(() => ({ n: 1n }));
  assert.equal(unstorable.state, "failed");
  assert.match((unstorable.error as Error).message, /^result cannot be stored/);
  assert.deepEqual((await runHandler(() => undefined)).result, null, "undefined is stored as null");
  const infinite = await runHandler(() => ({ n: Infinity }));
  assert.equal(infinite.state, "failed", "Infinity has no JSON form: refused as in a worker");
  assert.match(
    (infinite.error as Error).message,
    /^result cannot be stored: the number Infinity has no JSON form/,
  );
  // A hostile thrown value fails the attempt as in a worker (no throw out of runHandler).
  const hostile = Object.defineProperty(new TerminalError("x"), "message", {
    get() {
      throw new Error("getter");
    },
  });
  const thrown = await runHandler(() => Promise.reject(hostile));
  assert.equal(thrown.state, "failed");
  assert.equal(thrown.error, hostile);
});

Deno.test("runHandler: follow-up jobs and log lines are recorded; schemas apply as in a worker", async () => {
  const logger = recordingLogger();
  const run = await runHandler(resize, { url: "https://example.com/a.png" }, {
    kind: "resize",
    id: 41,
    logger,
    schemas: { notify: objectSchema({ user: "number" }) },
  });
  assert.equal(run.state, "completed");
  assert.equal(run.enqueued.length, 1);
  assert.deepEqual(
    [run.enqueued[0].kind, run.enqueued[0].args, run.enqueued[0].opts, run.enqueued[0].job.id],
    ["notify", { user: 7 }, { queue: "mail" }, 42],
  );
  assert.equal(run.enqueued[0].job.state, "available");
  assert.deepEqual(run.logs.map((l) => [l.level, l.message]), [[
    "info",
    "resizing https://example.com/a.png",
  ]]);
  assert.deepEqual(logger.lines.info, ["job 41 (resize, attempt 1): resizing https://example.com/a.png"]);

  // A follow-up its schema refuses: ctx.enqueue throws, as the worker's client would.
  const refused = await runHandler(
    async (_job, ctx) => await ctx.enqueue("notify", { user: "seven" }),
    {},
    { schemas: { notify: objectSchema({ user: "number" }) } },
  );
  assert.equal(refused.state, "retryable");
  assert.ok(refused.error instanceof ValidationError);
  assert.equal(refused.error.message, "args of notify are invalid: user: expected a number");

  // The kind's own schema: refused args fail the job without running the handler; valid ones arrive as
  // the schema's output.
  let ran = 0;
  const schema = objectSchema({ url: "string", width: "number" }, { defaults: { width: 640 } });
  const counted = (job: Job) => (ran++, job.args);
  const refusedArgs = await runHandler(counted, { url: 3 }, { schema, kind: "resize" });
  assert.equal(refusedArgs.state, "failed");
  assert.equal((refusedArgs.error as Error).message, "args of resize are invalid: url: expected a string");
  assert.equal(ran, 0);
  const valid = await runHandler(counted, { url: "u" }, { schema });
  assert.deepEqual(valid.result, { url: "u", width: 640 });
  const crashed = await runHandler(counted, {}, {
    schema: crashingSchema(new Error("the validator crashed")),
  });
  assert.deepEqual([crashed.state, (crashed.error as Error).message], ["retryable", "the validator crashed"]);
  assert.equal(ran, 1, "the handler ran only for the valid args");
});

Deno.test("runHandler: the deadline, the abort signal and callbacks", async () => {
  let reason: unknown;
  const slow = {
    handler: (_job: Job, ctx: { signal: AbortSignal }) =>
      new Promise((resolve) => {
        ctx.signal.addEventListener("abort", () => {
          reason = ctx.signal.reason;
          setTimeout(() => resolve("too late"), 20);
        });
      }),
    timeout: 50,
  };
  const r = await runHandler(slow);
  assert.equal(r.state, "retryable");
  assert.equal(
    (r.error as Error).message,
    "deadline exceeded: the handler ran longer than its timeout of 50 ms",
  );
  assert.equal(reason, "deadline");

  const ac = new AbortController();
  const cancelled = runHandler(
    (_job, ctx) =>
      new Promise((_, reject) => {
        const stop = () => reject(new Error(`${ctx.signal.reason}`));
        if (ctx.signal.aborted) stop();
        ctx.signal.addEventListener("abort", stop);
      }),
    {},
    { signal: ac.signal },
  );
  ac.abort("cancelled");
  assert.equal(((await cancelled).error as Error).message, "cancelled");

  const approve = async (
    _job: Job,
    ctx: { registerCallback(): Promise<string>; waitForCallback(id: string): Promise<unknown> },
  ) => {
    const id = await ctx.registerCallback();
    return { answer: await ctx.waitForCallback(id) };
  };
  const resumed = await runHandler(approve, {}, { resume: (id) => ({ approved: true, id }) });
  assert.equal(resumed.state, "completed");
  assert.equal((resumed.result as { answer: { approved: boolean } }).answer.approved, true);
  const unanswered = await runHandler(approve);
  assert.equal(unanswered.state, "retryable");
  assert.match((unanswered.error as Error).message, /no resume option/);
});

Deno.test("runHandler: ctx.progress is recorded and capped; ctx.transaction keeps its follow-ups only when it returns", async () => {
  type T = { order: Task<{ fail?: "inside" | "after" | "sql" }, { ok: boolean }>; receipt: { n: number } };
  const order: Handler<T["order"], T> = async (job, ctx) => {
    ctx.progress({ done: 1, of: 2 });
    ctx.progress("half way");
    assert.throws(() => ctx.progress("x".repeat(5_000)), ValidationError);
    const value = await ctx.transaction(async (tx) => {
      await tx.enqueue("receipt", { n: 1 });
      await ctx.enqueue("receipt", { n: 2 }); // joins the open transaction
      if (job.args.fail === "sql") await tx.db.query("select 1");
      if (job.args.fail === "inside") throw new Error("refused");
      return { ok: true };
    });
    if (job.args.fail === "after") throw new Error("too late: the job completed");
    return value;
  };

  const done = await runHandler(order, {});
  assert.equal(done.state, "completed");
  assert.equal(done.completedInTransaction, true);
  assert.deepEqual(done.result, { ok: true });
  assert.deepEqual(done.progress, [{ done: 1, of: 2 }, "half way"], "the value over the cap is not recorded");
  assert.deepEqual(done.enqueued.map((j) => j.args), [{ n: 1 }, { n: 2 }]);

  const inside = await runHandler(order, { fail: "inside" });
  assert.equal(inside.state, "retryable");
  assert.equal((inside.error as Error).message, "refused");
  assert.deepEqual(inside.enqueued, [], "a rolled back transaction leaves no follow-up");
  assert.equal(inside.completedInTransaction, false);

  const after = await runHandler(order, { fail: "after" });
  assert.equal(after.state, "completed", "a throw after the transaction changes nothing, as in a worker");
  assert.deepEqual(after.result, { ok: true });
  assert.equal(after.enqueued.length, 2);

  const sql = await runHandler(order, { fail: "sql" });
  assert.equal(sql.state, "retryable");
  assert.match((sql.error as Error).message, /^runHandler runs without a database/);
  assert.deepEqual(sql.enqueued, []);
});

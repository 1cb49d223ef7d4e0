/**
 * What a handler gets from the worker beyond the job: args validated by its kind's schema before it runs
 * (a refused job fails for good with the validator's message, its neighbours run), the schema's output as
 * `job.args`, `ctx.logger` naming the job (JSON fields or a text prefix), and `ctx.enqueue` for follow-up
 * jobs, on the storage engine of the run.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { crashingSchema, objectSchema } from "../helpers/schemas.ts";
import { recordingLogger } from "../helpers/fake_runtime.ts";
import { jsonLogger } from "../../src/worker/logger.ts";
import { createClient, type Job, ValidationError } from "../../mod.ts";

const finished = (client: { getJob(id: number): Promise<Job | null> }, id: number, timeoutMs = 20_000) =>
  waitFor(
    async () => {
      const j = (await client.getJob(id))!;
      return ["completed", "failed"].includes(j.state) ? j : null;
    },
    timeoutMs,
    `job ${id} to finish`,
  );

Deno.test("schemas at claim: a refused job fails at once with the validator's message; the handler gets the output", async () => {
  const { client, drop } = await testClient();
  const seen: unknown[] = [];
  // The producer has no schema (another service, SQL, an older release): the worker is the last line.
  const { stop } = await startWorker(client, {
    schemas: {
      resize: z.object({ url: z.url(), width: z.number().int().positive().default(640) }),
      crash: crashingSchema(new Error("the validator crashed")),
    },
    handlers: {
      resize: (job) => {
        seen.push(job.args);
        return { width: job.args.width };
      },
      crash: { handler: () => "never", backoff: () => 20 },
    },
  });
  try {
    const bad = await client.enqueue("resize", { url: "not a url", width: -1 }, { maxAttempts: 5 });
    const good = await client.enqueue("resize", { url: "https://example.com/a.png" });
    const b = (await finished(client, bad.id))!;
    assert.equal(b.state, "failed");
    assert.equal(b.attempt, 1, "failed at the first attempt, whatever attempts remain");
    assert.equal(b.errors.length, 1);
    assert.equal(b.errors[0].terminal, true);
    assert.match(b.errors[0].error, /^args of resize are invalid: url: Invalid URL; width: Too small/);
    const g = (await finished(client, good.id))!;
    assert.equal(g.state, "completed");
    assert.deepEqual(g.result, { width: 640 });
    assert.deepEqual(seen, [{ url: "https://example.com/a.png", width: 640 }], "only the valid job ran");
    assert.deepEqual(g.args, { url: "https://example.com/a.png" }, "the stored args are left as enqueued");
    // A validator that throws fails the attempt like a throwing handler: retried, not failed at once.
    const crash = await client.enqueue("crash", {}, { maxAttempts: 2 });
    const c = (await finished(client, crash.id, 40_000))!; // two attempts, a retry between them
    assert.deepEqual(c.errors.map((e) => e.error), ["the validator crashed", "the validator crashed"]);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("schemas at claim: the worker takes its client's schemas; an async validator works", async () => {
  const { client, drop } = await testClient({
    schemas: { greet: objectSchema({ name: "string" }, { async: true, defaults: { name: "world" } }) },
  });
  const { stop } = await startWorker(client, { handlers: { greet: (job) => `hello, ${job.args.name}` } });
  try {
    const unvalidated = createClient({ sql: client.sql, schema: client.schema });
    const bad = await unvalidated.enqueue("greet", { name: 42 }); // through a client without schemas
    const good = await client.enqueue("greet", {});
    assert.equal((await finished(client, good.id))!.result, "hello, world");
    const b = (await finished(client, bad.id))!;
    assert.equal(b.state, "failed");
    assert.equal(b.errors[0].error, "args of greet are invalid: name: expected a string");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx.logger: JSON lines carry job_id, kind and attempt; a logger without child gets a prefix", async () => {
  const { client, drop } = await testClient();
  const lines: string[] = [];
  const json = jsonLogger({ out: (l) => lines.push(l), err: (l) => lines.push(l) });
  const { stop } = await startWorker(client, {
    logger: json,
    handlers: {
      talk: (job, ctx) => {
        ctx.logger.info("working on", job.args.n);
        ctx.logger.warn(new Error("a warning"));
        return null;
      },
    },
  });
  const text = recordingLogger();
  let textWorker: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const job = await client.enqueue("talk", { n: 1 }, { queue: "default" });
    await finished(client, job.id);
    const mine = lines.map((l) => JSON.parse(l)).filter((e) => e.job_id === job.id);
    assert.deepEqual(
      mine.map((e) => [e.level, e.msg, e.kind, e.attempt]),
      [["info", "working on 1", "talk", 1], ["warn", "a warning", "talk", 1]],
    );
    assert.equal(mine[1].error.message, "a warning");
    await stop();

    textWorker = await startWorker(client, {
      logger: text,
      handlers: {
        talk: (_job, ctx) => {
          ctx.logger.info("plain");
          return null;
        },
      },
    });
    const other = await client.enqueue("talk", {});
    await finished(client, other.id);
    assert.ok(
      text.lines.info.includes(`job ${other.id} (talk, attempt 1): plain`),
      text.lines.info.join("\n"),
    );
  } finally {
    await stop();
    await textWorker?.stop();
    await drop();
  }
});

Deno.test("ctx.enqueue: follow-up jobs through the worker's client, validated by its schemas", async () => {
  const { client, drop } = await testClient({ schemas: { notify: objectSchema({ user: "number" }) } });
  const { stop } = await startWorker(client, {
    handlers: {
      signup: async (job, ctx) => {
        const followUp = await ctx.enqueue("notify", { user: job.args.user as number }, { priority: 1 });
        const [batch] = await ctx.enqueueMany([{ kind: "notify", args: { user: 2 }, queue: "other" }]);
        const refused = await ctx.enqueue("notify", { user: "x" }).then(() => null, (e) => e);
        const noTx = await Promise.resolve().then(() =>
          ctx.enqueue("notify", { user: 3 }, { tx: {} } as never)
        )
          .then(() => null, (e) => e);
        return {
          followUp: followUp.id,
          batch: batch.id,
          refused: refused instanceof ValidationError ? refused.message : String(refused),
          noTx: noTx instanceof ValidationError ? noTx.message : String(noTx),
        };
      },
    },
  });
  try {
    const job = await client.enqueue("signup", { user: 1 });
    const done = (await finished(client, job.id))!;
    assert.equal(done.state, "completed", JSON.stringify(done.errors));
    const r = done.result as { followUp: number; batch: number; refused: string; noTx: string };
    const f = (await client.getJob(r.followUp))!;
    assert.deepEqual([f.kind, f.args, f.priority], ["notify", { user: 1 }, 1]);
    assert.equal((await client.getJob(r.batch))!.queue, "other");
    assert.equal(r.refused, "args of notify are invalid: user: expected a number");
    assert.match(r.noTx, /ctx.enqueue takes no tx/);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx's functions work when taken out of it (destructured), and each is the same function on every read", async () => {
  const { client, drop } = await testClient();
  const seen: { same: boolean; child: number; keys: string[] }[] = [];
  const { stop } = await startWorker(client, {
    handlers: {
      parent: async (_job, ctx) => {
        const { enqueue, progress, logger, signal, traceparent } = ctx;
        progress({ step: 1 });
        const child = await enqueue("child", { from: "destructured" });
        logger.info("enqueued a child");
        seen.push({
          same: ctx.enqueue === enqueue && ctx.progress === progress && !signal.aborted &&
            (traceparent === null || typeof traceparent === "string"),
          child: child.id,
          keys: ["signal", "logger", "enqueue", "enqueueMany", "transaction", "progress", "registerCallback"]
            .filter((k) => !(k in ctx)),
        });
        return null;
      },
      child: () => null,
    },
  });
  try {
    const job = await client.enqueue("parent", {});
    await finished(client, job.id);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].same, true);
    assert.deepEqual(seen[0].keys, [], "every member is there");
    const child = await finished(client, seen[0].child);
    assert.equal(child?.state, "completed");
    assert.deepEqual(child?.args, { from: "destructured" });
  } finally {
    await stop();
    await drop();
  }
});

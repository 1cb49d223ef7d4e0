/**
 * Each failed attempt keeps its error's stack, apart from its message: a handler's Error.stack, an HTTP
 * function's status and the first bytes of its answer, a rescue's reason; cut at 8 KB. Read back through
 * the client, GET /api/jobs/:id and the job a later attempt's handler gets, on the engine of the run.
 */
import assert from "node:assert/strict";
import { staleRuntime, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { serveTest } from "../helpers/http.ts";
import { send } from "../helpers/admin.ts";
import { createAdminServer } from "../../src/http/server.ts";
import { MAX_STACK_BYTES } from "../../src/job_errors.ts";
import { type Job, TerminalError } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";

/** Waits for the job to match `ok`; returns it. */
async function until(client: Client, id: number, ok: (j: Job) => boolean, what: string): Promise<Job> {
  let got: Job | null = null;
  await waitFor(
    async () => {
      got = await client.getJob(id);
      return got !== null && ok(got);
    },
    20_000,
    what,
  );
  return got!;
}

function throwDeep(n: number): never {
  if (n === 0) throw new Error("deep trouble");
  return throwDeep(n - 1);
}

Deno.test("a handler's error keeps its stack per attempt; a huge stack is cut at 8 KB; the next attempt's job sees them", async () => {
  const { client, drop } = await testClient();
  let seen: Job | null = null;
  let calls = 0;
  const { stop } = await startWorker(client, {
    handlers: {
      flaky: {
        handler: function flakyHandler(job) {
          calls++;
          if (calls === 1) throwDeep(3);
          if (calls === 2) {
            const e = new Error("huge");
            e.stack = "Error: huge\n" + "    at frame (é.ts:1:1)\n".repeat(2000);
            throw e;
          }
          seen = job;
          return "ok";
        },
        backoff: () => 10,
      },
      plain: () => {
        throw "a string, not an Error"; // no stack to keep
      },
      terminal: () => {
        throw new TerminalError("bad input");
      },
    },
  });
  try {
    const [flaky, plain, terminal] = await client.enqueueMany([
      { kind: "flaky" },
      { kind: "plain", maxAttempts: 1 },
      { kind: "terminal" },
    ]);
    const done = await until(client, flaky.id, (j) => j.state === "completed", "the flaky job to complete");
    assert.equal(done.errors.length, 2);
    const [e1, e2] = done.errors;
    assert.equal(e1.error, "deep trouble", "the message alone, as before");
    assert.match(e1.stack!, /^Error: deep trouble\n\s+at throwDeep /);
    assert.match(e1.stack!, /flakyHandler/);
    assert.equal(e2.error, "huge");
    assert.ok(new TextEncoder().encode(e2.stack!).length <= MAX_STACK_BYTES + 40, "cut near 8 KB");
    assert.match(e2.stack!, /\n… \(\d+ more bytes\)$/);
    assert.ok(e2.stack!.startsWith("Error: huge\n    at frame (é.ts:1:1)"));
    assert.ok(!e2.stack!.includes("\ufffd"), "cut between characters");
    assert.deepEqual(
      (seen as Job | null)?.errors.map((e) => [e.error, typeof e.stack]),
      [["deep trouble", "string"], ["huge", "string"]],
      "the third attempt's handler got both errors with their stacks",
    );

    const p = await until(client, plain.id, (j) => j.state === "failed", "the plain job to fail");
    assert.equal(p.errors[0].error, "a string, not an Error");
    assert.equal(p.errors[0].stack, undefined);
    const t = await until(client, terminal.id, (j) => j.state === "failed", "the terminal job to fail");
    assert.match(t.errors[0].stack!, /TerminalError: bad input/);

    // The admin API and listJobs carry errors[].stack.
    const app = createAdminServer(client, {
      callbackAuth: { kind: "unsigned" },
      logger: { info() {}, error() {} },
    });
    const a = await send(app.fetch, "GET", `/api/jobs/${flaky.id}`);
    assert.equal(a.status, 200);
    assert.equal(a.body.job.errors[0].error, "deep trouble");
    assert.match(a.body.job.errors[0].stack, /throwDeep/);
    const listed = (await client.listJobs({ kind: "flaky" })).jobs[0];
    assert.equal(listed.errors[0].stack, e1.stack);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("an HTTP function's failure keeps its status, Retry-After and the first bytes of its answer as the stack", async () => {
  const { client, drop } = await testClient();
  const fn = serveTest(() =>
    Promise.resolve(
      new Response("upstream database is down\ntrace id 42", {
        status: 503,
        headers: { "retry-after": "1" },
      }),
    )
  );
  const { stop } = await startWorker(client, {
    httpWorkers: {
      fn: { url: `${fn.url}/fn`, mode: "async", callbackBaseUrl: "http://127.0.0.1:9", maxAttempts: 1 },
    },
  });
  try {
    const job = await client.enqueue("fn", {});
    const failed = await until(client, job.id, (j) => j.errors.length > 0, "the attempt to fail");
    const e = failed.errors[0];
    assert.match(e.error, /^function endpoint responded HTTP 503/);
    assert.equal(
      e.stack,
      "HTTP 503 Service Unavailable\nretry-after: 1\n\nupstream database is down\ntrace id 42",
    );
  } finally {
    await stop();
    await fn.close();
    await drop();
  }
});

Deno.test("a rescued attempt's stack says what the leader saw", async () => {
  const { client, drop } = await testClient();
  try {
    const job = await client.enqueue("k", {});
    const [claimed] = await client.engine.claim({
      queue: "default",
      limit: 1,
      free: 1,
      runtimeId: "gone-runtime",
      policies: {},
      callbackTimeoutsMs: {},
      prefetchTtlMs: 60_000,
    });
    assert.equal(claimed.id, job.id);
    await staleRuntime(client, "gone-runtime");
    const rescued = await client.engine.rescue(1_000);
    assert.deepEqual(rescued.map((r) => r.id), [job.id]);
    const after = (await client.getJob(job.id))!;
    assert.match(after.errors[0].error, /^rescued: /);
    assert.match(after.errors[0].stack!, /^the leader rescued this attempt \(/);
  } finally {
    await drop();
  }
});

/**
 * The HTTP worker in mode `async`, end to end over real HTTP on 127.0.0.1 and the real database:
 * a worker, a test function server (Deno.serve on port 0) and the callback receiver.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { closedPort, post, serveTest, type TestServer } from "../helpers/http.ts";
import {
  callbackUrl,
  createCallbackRouter,
  createWorker,
  type FunctionRequest,
  type HttpWorkerConfig,
  parseSecret,
  sign,
  SIGNATURE_HEADER,
  silentLogger,
} from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";
import type { Job } from "../../src/types.ts";
import { parseRetryAfter } from "../../src/worker/http_worker.ts";

const SECRET = parseSecret("5e".repeat(32));

/** One request the function server received. */
interface Received {
  headers: Headers;
  body: FunctionRequest;
}

interface Env {
  client: Client;
  fn: TestServer;
  receiver: TestServer;
  received: Received[];
  /** Resolves once the job with this id reaches one of `states`. */
  until(id: number, ...states: string[]): Promise<Job>;
  /**
   * Shuts the worker down, waiting up to `drainMs` for its attempts in flight to end (what each does after
   * the function's answer included); idempotent.
   */
  stop(drainMs?: number): Promise<void>;
  /** POSTs to a callback URL forwarding the signature header the function received, like a real function. */
  callBack(r: Received, url: string, body: unknown): Promise<{ status: number; body: any }>;
}

type FnHandler = (r: Received, env: Env, req: Request) => Response | Promise<Response>;

/**
 * Starts the receiver (signed unless `secret: null`), a function server answering with `fn`, and a
 * worker whose kind `fn` is pushed to that server; runs `body`; then tears everything down.
 */
async function withHttpWorker(
  opts: {
    fn: FnHandler;
    config?: Partial<HttpWorkerConfig>;
    receiverPrefix?: string;
    secret?: Uint8Array | null;
    maxWorkers?: number;
  },
  body: (env: Env) => Promise<void>,
): Promise<void> {
  const { client, drop } = await testClient();
  const secret = opts.secret === undefined ? SECRET : opts.secret;
  const router = createCallbackRouter(client, {
    auth: secret ? { kind: "signed", secret } : { kind: "unsigned" },
    pathPrefix: opts.receiverPrefix,
  });
  const receiver = serveTest(router.fetch);
  const background: Promise<unknown>[] = [];
  const env = { client, receiver, received: [] as Received[] } as unknown as Env;
  env.until = (id, ...states) =>
    waitFor(
      async () => {
        const j = (await client.getJob(id))!;
        return states.includes(j.state) ? j : null;
      },
      10_000,
      `job ${id} to be ${states.join(" or ")}`,
    ) as Promise<Job>;
  env.callBack = (r, url, b) => {
    const sig = r.headers.get(SIGNATURE_HEADER);
    const p = post(url, b, sig ? { [SIGNATURE_HEADER]: sig } : {});
    background.push(p.catch(() => {}));
    return p;
  };
  env.fn = serveTest(async (req) => {
    const r: Received = { headers: req.headers, body: await req.json() };
    env.received.push(r);
    return await opts.fn(r, env, req);
  });
  const { stop } = await startWorker(client, {
    queues: { default: { maxWorkers: opts.maxWorkers ?? 5 } },
    httpWorkers: {
      fn: {
        url: `${env.fn.url}/fn`,
        mode: "async",
        callbackBaseUrl: receiver.url,
        hmacSecret: secret ?? undefined,
        backoff: () => 50,
        ...opts.config,
      },
    },
  });
  env.stop = stop;
  try {
    await body(env);
  } finally {
    await stop();
    await Promise.allSettled(background);
    await env.fn.close();
    await receiver.close();
    await drop();
  }
}

/** Calls back later, outside the function's request (the usual shape of an async function). */
function later(fn: () => Promise<unknown>, ms = 0): void {
  setTimeout(() => fn().catch(() => {}), ms);
}

Deno.test("contract section 1 end to end: POST, 2xx parks and frees the slot, signed complete, job completed", async () => {
  const waiting = new Set<number>();
  await withHttpWorker({
    maxWorkers: 1,
    config: { headers: { "x-tenant": "acme" }, callbackTimeout: 120_000 },
    fn: (r, env) => {
      waiting.add(r.body.job_id);
      // Both jobs reach the function although the queue has one slot: a parked attempt holds none.
      if (waiting.size === 2) {
        for (const got of env.received) {
          later(async () => {
            await env.until(got.body.job_id, "waiting_external");
            await env.callBack(got, got.body.callback_url, { payload: { resized: got.body.args.image } });
          });
        }
      }
      return new Response("accepted", { status: 202 });
    },
  }, async ({ client, received, receiver, until }) => {
    const a = await client.enqueue("fn", { image: "a.png" }, { maxAttempts: 3 });
    const b = await client.enqueue("fn", { image: "b.png" });
    const doneA = await until(a.id, "completed", "failed");
    const doneB = await until(b.id, "completed", "failed");
    assert.equal(doneA.state, "completed");
    assert.deepEqual(doneA.result, { resized: "a.png" });
    assert.deepEqual(doneB.result, { resized: "b.png" });
    assert.equal(doneA.errors.length, 0);

    assert.equal(received.length, 2);
    const r = received.find((x) => x.body.job_id === a.id)!;
    const cb = r.body.callback_id;
    assert.deepEqual(Object.keys(r.body).sort(), [
      "args",
      "attempt",
      "callback_id",
      "callback_url",
      "fail_url",
      "heartbeat_url",
      "job_id",
      "kind",
      "max_attempts",
    ]);
    assert.deepEqual(r.body, {
      job_id: a.id,
      kind: "fn",
      args: { image: "a.png" },
      attempt: 1,
      max_attempts: 3,
      callback_id: cb,
      callback_url: callbackUrl(receiver.url, "/api/callbacks", cb, "complete"),
      fail_url: callbackUrl(receiver.url, "/api/callbacks", cb, "fail"),
      heartbeat_url: callbackUrl(receiver.url, "/api/callbacks", cb, "heartbeat"),
    });
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal(r.headers.get("idempotency-key"), `${a.id}:1`);
    assert.equal(r.headers.get(SIGNATURE_HEADER), sign(SECRET, cb));
    assert.equal(r.headers.get("x-tenant"), "acme");
    assert.equal(doneA.callbackId, cb);
    const rec = (await client.getCallback(cb))!;
    assert.equal(rec.kind, "http");
    assert.equal(rec.state, "completed");
  });
});

Deno.test("parks are written after the slot is freed, and shutdown waits for them: every answered job ends parked", async () => {
  const { client, drop } = await testClient();
  const receiver = serveTest(createCallbackRouter(client, { auth: { kind: "unsigned" } }).fetch);
  let answered = 0;
  const fn = serveTest(async (req) => {
    await req.json();
    answered++;
    return new Response(null, { status: 202 });
  });
  try {
    const jobs = await client.enqueueMany(Array.from({ length: 30 }, () => ({ kind: "fn" })));
    const { stop } = await startWorker(client, {
      queues: { default: { maxWorkers: 10 } },
      httpWorkers: { fn: { url: `${fn.url}/fn`, mode: "async", callbackBaseUrl: receiver.url } },
    });
    await waitFor(() => answered >= 5, 10_000, "the function to answer");
    await stop(); // stops claiming, waits for the POSTs in flight, then for their parks
    const states = await Promise.all(jobs.map(async (j) => (await client.getJob(j.id))!.state));
    const parked = states.filter((s) => s === "waiting_external").length;
    assert.equal(
      parked,
      answered,
      `every job the function answered is parked after shutdown: ${states.join(",")}`,
    );
    assert.ok(states.every((s) => s === "waiting_external" || s === "available"), states.join(","));
  } finally {
    await fn.close();
    await receiver.close();
    await drop();
  }
});

Deno.test("a function that calls back before sending its own 2xx: the job is completed, nothing else written", async () => {
  let answer: { status: number; body: any } | undefined;
  await withHttpWorker({
    fn: async (r, env) => {
      answer = await env.callBack(r, r.body.callback_url, { payload: { early: true } });
      return new Response(null, { status: 200 });
    },
  }, async ({ client, until, stop }) => {
    const job = await client.enqueue("fn", {});
    const done = await until(job.id, "completed", "failed", "retryable");
    assert.equal(done.state, "completed");
    assert.deepEqual(done.result, { early: true });
    await waitFor(() => answer !== undefined, 5_000, "the receiver's answer to reach the function");
    assert.equal(answer?.status, 200);
    assert.equal(answer?.body.state, "completed");
    // The worker's park after the 2xx found nothing to do: once the worker has shut down, which waits for
    // the attempt to end (its park included), nothing changed.
    await stop(10_000);
    const after = (await client.getJob(job.id))!;
    assert.equal(after.state, "completed");
    assert.equal(after.errors.length, 0);
    assert.equal(after.attempt, 1);
  });
});

Deno.test("without hmacSecret no signature header is sent, and an unsigned receiver accepts the callback", async () => {
  await withHttpWorker({
    secret: null,
    fn: (r, env) => {
      later(() => env.callBack(r, r.body.callback_url, { payload: "unsigned" }));
      return new Response(null, { status: 204 });
    },
  }, async ({ client, until, received }) => {
    const job = await client.enqueue("fn", {});
    assert.equal((await until(job.id, "completed")).result, "unsigned");
    assert.equal(received[0].headers.get(SIGNATURE_HEADER), null);
  });
});

Deno.test("fail callback: terminal by default; retryable: true retries and the next attempt can complete", async () => {
  await withHttpWorker({
    fn: (r, env) => {
      const mode = r.body.args.mode;
      later(() =>
        mode === "terminal"
          ? env.callBack(r, r.body.fail_url, { error: "unsupported image format" })
          : r.body.attempt === 1
          ? env.callBack(r, r.body.fail_url, { error: "GPU busy", retryable: true })
          : env.callBack(r, r.body.callback_url, { payload: { attempt: r.body.attempt } })
      );
      return new Response(null, { status: 202 });
    },
  }, async ({ client, until, received }) => {
    const terminal = await client.enqueue("fn", { mode: "terminal" });
    const retry = await client.enqueue("fn", { mode: "retry" });
    const t = await until(terminal.id, "failed", "completed");
    assert.equal(t.state, "failed");
    assert.equal(t.attempt, 1);
    assert.deepEqual(t.errors.map((e) => [e.attempt, e.error, e.terminal]), [[
      1,
      "unsupported image format",
      true,
    ]]);

    const r = await until(retry.id, "completed", "failed");
    assert.equal(r.state, "completed");
    assert.equal(r.attempt, 2);
    assert.deepEqual(r.result, { attempt: 2 });
    assert.deepEqual(r.errors.map((e) => [e.attempt, e.error, e.terminal]), [[1, "GPU busy", false]]);
    assert.equal(received.filter((x) => x.body.job_id === retry.id).length, 2);
  });
});

Deno.test("heartbeat keeps a parked job alive past its original callback timeout", async () => {
  // The function's heartbeat runs after it answered 202; the test waits for the heartbeat's own answer
  // before it looks past the original deadline (on a loaded machine it could land after that check). A
  // failed heartbeat settles the status too (-1), so the test fails instead of waiting.
  let heartbeatStatus = 0;
  await withHttpWorker({
    config: { callbackTimeout: 3_000 },
    fn: (r, env) => {
      later(async () => {
        try {
          await env.until(r.body.job_id, "waiting_external");
          heartbeatStatus = (await env.callBack(r, r.body.heartbeat_url, { timeout_seconds: 30 })).status;
        } catch (e) {
          heartbeatStatus = -1;
          throw e;
        }
      });
      return new Response(null, { status: 202 });
    },
  }, async ({ client, until, received, callBack }) => {
    const job = await client.enqueue("fn", {}, { maxAttempts: 1 });
    await until(job.id, "waiting_external");
    await waitFor(() => heartbeatStatus !== 0, 10_000);
    assert.equal(heartbeatStatus, 200, "the heartbeat was accepted");
    // Past the original 3 s deadline (plus several 50 ms rounds of the leader expiring callbacks).
    const cb = (await client.getCallback(received[0].body.callback_id))!;
    const originalDeadline = cb.createdAt.getTime() + 3_000;
    await waitFor(() => Date.now() > originalDeadline + 400, 10_000);
    const parked = (await client.getJob(job.id))!;
    assert.equal(parked.state, "waiting_external", "still waiting thanks to the heartbeat");
    assert.ok(parked.callbackTimeoutAt!.getTime() > Date.now() + 20_000);
    const r = await callBack(received[0], received[0].body.callback_url, { payload: "finally" });
    assert.equal(r.status, 200);
    assert.equal((await until(job.id, "completed")).result, "finally");
  });
});

Deno.test("callback timeout: the parked attempt expires (failed when exhausted, else retryable) and a late complete gets 409", async () => {
  await withHttpWorker({
    config: { callbackTimeout: 300 },
    fn: () => new Response(null, { status: 202 }), // never calls back
  }, async ({ client, until, received, callBack }) => {
    const last = await client.enqueue("fn", {}, { maxAttempts: 1 });
    const more = await client.enqueue("fn", {}, { maxAttempts: 5 });
    const failed = await until(last.id, "failed");
    assert.equal(failed.errors.at(-1)!.error, "callback timed out");
    assert.equal(failed.errors.at(-1)!.terminal, true);
    const retryable = await until(more.id, "retryable");
    assert.equal(retryable.errors[0].error, "callback timed out");
    assert.equal(retryable.errors[0].terminal, false);

    const r = received.find((x) => x.body.job_id === last.id)!;
    assert.equal((await client.getCallback(r.body.callback_id))!.state, "expired");
    const late = await callBack(r, r.body.callback_url, { payload: 1 });
    assert.equal(late.status, 409);
    assert.equal(late.body.code, "callback_not_pending");
  });
});

Deno.test("function responses: 3xx and 4xx terminal, listed statuses and 5xx retryable, timeout and connection errors retryable", async () => {
  let redirectFollowed = false;
  await withHttpWorker({
    config: {
      requestTimeout: 1_000, // generous: a loaded CI machine must not turn a 404 into a timeout
      retryableStatuses: [429],
      backoff: () => 3_600_000, // retries stay in the future while the test looks at them
    },
    fn: async (r, _env, req) => {
      if (new URL(req.url).pathname === "/moved") redirectFollowed = true;
      switch (r.body.args.mode) {
        case "301":
          return new Response("moved", { status: 301, headers: { location: "/moved" } });
        case "404":
          return new Response("no such function", { status: 404 });
        case "418":
          return new Response("teapot", { status: 418 });
        case "429":
          return new Response("slow down", { status: 429, headers: { "retry-after": "30" } });
        case "500":
          return new Response("é" + "x".repeat(3000), { status: 500 });
        case "503":
          return new Response(null, { status: 503 });
        case "slow": // answers only after the worker gave up (or 10 s), so teardown does not wait on it
          await new Promise((res) => {
            const t = setTimeout(res, 10_000);
            req.signal.addEventListener("abort", () => res(clearTimeout(t)));
          });
          return new Response(null, { status: 202 });
      }
      return new Response(null, { status: 202 });
    },
  }, async ({ client, until }) => {
    const enqueue = (mode: string) => client.enqueue("fn", { mode }, { maxAttempts: 5 });
    const [j301, j404, j418, j429, j500, j503, slow] = await Promise.all(
      ["301", "404", "418", "429", "500", "503", "slow"].map(enqueue),
    );
    const err = async (j: Job, state: string) => {
      const done = await until(j.id, state);
      assert.equal(done.errors.length, 1, `${j.args.mode}: one error`);
      assert.equal(done.errors[0].terminal, state === "failed");
      return done.errors[0].error;
    };
    assert.match(await err(j301, "failed"), /HTTP 301.*redirect to \/moved not followed.*moved/);
    assert.equal(redirectFollowed, false);
    assert.match(await err(j404, "failed"), /HTTP 404.*: no such function$/);
    assert.match(await err(j418, "failed"), /HTTP 418.*teapot/);

    assert.match(await err(j429, "retryable"), /HTTP 429.*slow down/);
    const runAt = (await client.getJob(j429.id))!.runAt.getTime() - Date.now();
    assert.ok(
      runAt > 20_000 && runAt < 40_000,
      `Retry-After: 30 honoured over the backoff (run_at in ${runAt} ms)`,
    );

    const e500 = await err(j500, "retryable");
    assert.match(e500, /^function endpoint responded HTTP 500/);
    const excerpt = e500.slice(e500.indexOf(": ") + 2);
    assert.ok(excerpt.startsWith("éxxx"));
    assert.ok(excerpt.endsWith("…"), "marked as cut");
    assert.equal(new TextEncoder().encode(excerpt.slice(0, -1)).length, 1024, "the first 1 KiB of the body");
    assert.match(await err(j503, "retryable"), /HTTP 503/);
    assert.match(await err(slow, "retryable"), /did not answer within the request timeout of 1000 ms/);
  });

  // Connection refused: nothing listens at the function's address.
  const { client, drop } = await testClient();
  const { stop } = await startWorker(client, {
    httpWorkers: {
      fn: {
        url: `http://127.0.0.1:${closedPort()}/fn`,
        mode: "async",
        callbackBaseUrl: "http://127.0.0.1:1",
        backoff: () => 3_600_000,
      },
    },
  });
  try {
    const job = await client.enqueue("fn", {});
    const done = await waitFor(async () => {
      const j = (await client.getJob(job.id))!;
      return j.state === "retryable" ? j : null;
    }) as Job;
    assert.match(done.errors[0].error, /could not reach the function endpoint/);
    assert.equal(done.errors[0].terminal, false);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("every attempt gets a fresh callback_id; after a retry the old one is answered 409", async () => {
  await withHttpWorker({
    fn: (r) => new Response(null, { status: r.body.attempt === 1 ? 500 : 202 }),
  }, async ({ client, until, received, callBack }) => {
    const job = await client.enqueue("fn", {});
    await waitFor(() => received.length === 2, 10_000, "the second attempt");
    await until(job.id, "waiting_external");
    const [first, second] = received;
    assert.deepEqual([first.body.attempt, second.body.attempt], [1, 2]);
    assert.notEqual(first.body.callback_id, second.body.callback_id);
    assert.equal(first.headers.get("idempotency-key"), `${job.id}:1`);
    assert.equal(second.headers.get("idempotency-key"), `${job.id}:2`);
    assert.notEqual(first.headers.get(SIGNATURE_HEADER), second.headers.get(SIGNATURE_HEADER));
    assert.equal((await client.getJob(job.id))!.callbackId, second.body.callback_id);

    const old = await callBack(first, first.body.callback_url, { payload: "stale" });
    assert.equal(old.status, 409);
    assert.equal(old.body.code, "callback_not_pending");
    assert.equal((await client.getCallback(first.body.callback_id))!.state, "superseded");

    const ok = await callBack(second, second.body.callback_url, { payload: "fresh" });
    assert.equal(ok.status, 200);
    assert.equal((await until(job.id, "completed")).result, "fresh");
  });
});

Deno.test("a worker/receiver path-prefix mismatch: the function's callback gets 404 not_found naming the fix", async () => {
  let answer: { status: number; body: any } | undefined;
  await withHttpWorker({
    config: { callbackPathPrefix: "/hooks" }, // the receiver keeps the default /api/callbacks
    fn: (r, env) => {
      later(async () => (answer = await env.callBack(r, r.body.callback_url, { payload: 1 })));
      return new Response(null, { status: 202 });
    },
  }, async ({ client, until, received, receiver }) => {
    const job = await client.enqueue("fn", {});
    await until(job.id, "waiting_external");
    await waitFor(() => answer !== undefined);
    assert.ok(received[0].body.callback_url.startsWith(`${receiver.url}/hooks/`));
    assert.equal(answer!.status, 404);
    assert.equal(answer!.body.code, "not_found");
    assert.match(answer!.body.error, /callbackPathPrefix must match the receiver's --path-prefix/);
    assert.equal((await client.getJob(job.id))!.state, "waiting_external", "the job still waits");
  });
});

Deno.test("createWorker refuses a bad httpWorkers entry with an error naming the option", () => {
  const base = { databaseUrl: "postgres://127.0.0.1:1/none", queues: { default: {} } };
  const ok: HttpWorkerConfig = {
    url: "http://127.0.0.1:9/fn",
    mode: "async",
    callbackBaseUrl: "http://127.0.0.1:4000",
  };
  const bad: [Partial<HttpWorkerConfig>, RegExp][] = [
    [{ callbackBaseUrl: undefined }, /httpWorkers\.resize\.callbackBaseUrl is required in async mode/],
    [{ callbackBaseUrl: "" }, /callbackBaseUrl is required/],
    [{ callbackBaseUrl: "svc.example.com" }, /callbackBaseUrl must be an http\(s\) URL/],
    [{ mode: "sync" as "async" }, /httpWorkers\.resize\.mode must be "async"/],
    [{ url: "ftp://x" }, /httpWorkers\.resize\.url must be an http\(s\) URL/],
    [{ hmacSecret: new Uint8Array(8) }, /hmacSecret must be 32 bytes/],
    [{ requestTimeout: 0 }, /requestTimeout must be a positive/],
    [{ callbackTimeout: -1 }, /callbackTimeout must be a positive/],
    [{ headers: { "Idempotency-Key": "x" } }, /headers must not set Idempotency-Key/],
    [{ retryableStatuses: ["429" as unknown as number] }, /retryableStatuses/],
  ];
  for (const [patch, re] of bad) {
    assert.throws(() => createWorker({ ...base, httpWorkers: { resize: { ...ok, ...patch } } }), re);
  }
  assert.throws(
    () => createWorker({ ...base, handlers: { resize: () => 1 }, httpWorkers: { resize: ok } }),
    /both a handler and an HTTP worker/,
  );
});

Deno.test("parseRetryAfter: seconds or an HTTP date, capped at 24 h", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter(null, now), null);
  assert.equal(parseRetryAfter("120", now), 120_000);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30_000);
  assert.equal(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now), 0, "a date in the past");
  assert.equal(parseRetryAfter("9999999", now), 86_400_000);
  assert.equal(parseRetryAfter("soon", now), null);
  assert.equal(parseRetryAfter("-5", now), null);
});

Deno.test("a worker warns at start about an HTTP kind without hmacSecret, naming it", async () => {
  const { client, drop } = await testClient();
  const warnings: string[] = [];
  const logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
  const { stop } = await startWorker(client, {
    logger,
    httpWorkers: {
      unsigned_fn: { url: "http://127.0.0.1:9/fn", mode: "async", callbackBaseUrl: "http://127.0.0.1:9" },
      signed_fn: {
        url: "http://127.0.0.1:9/fn",
        mode: "async",
        callbackBaseUrl: "http://127.0.0.1:9",
        hmacSecret: parseSecret("ab".repeat(32)),
      },
    },
  });
  try {
    const about = warnings.filter((w) => /hmacSecret/.test(w));
    assert.equal(about.length, 1, warnings.join("\n"));
    assert.match(about[0], /HTTP worker unsigned_fn has no hmacSecret/);
  } finally {
    await stop();
    await drop();
  }
});

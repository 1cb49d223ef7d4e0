/**
 * The callback receiver over real HTTP on 127.0.0.1 against the real database: every step of the
 * check order (docs/reference/protocol.md, "Status codes, in the order the receiver checks them"), signed
 * and unsigned, read-only, paths and methods, CORS off by default, 500 hiding details, and 200 concurrent
 * completes of one callback.
 */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { svcIn } from "../helpers/cli.ts";
import { closedPort, pendingCallback, post, serveTest } from "../helpers/http.ts";
import {
  type CallbackRouterOptions,
  callbackUrl,
  createCallbackRouter,
  parseSecret,
  sign,
  SIGNATURE_HEADER,
} from "../../mod.ts";
import { createClient } from "../../src/client/client.ts";
import { MAX_CALLBACK_BODY_BYTES } from "../../src/http/callback_router.ts";
import type { Client } from "../../src/client/client.ts";

const SECRET = parseSecret("7f".repeat(16) + "0123456789abcdef".repeat(2));
const OTHER = parseSecret("ab".repeat(32));
const signed = (id: string) => ({ [SIGNATURE_HEADER]: sign(SECRET, id) });

async function withReceiver(
  opts: Partial<CallbackRouterOptions>,
  fn: (
    r: {
      client: Client;
      base: string;
      url: (id: string, action?: "complete" | "fail" | "heartbeat") => string;
    },
  ) => Promise<void>,
): Promise<void> {
  const { client, drop } = await testClient();
  const router = createCallbackRouter(client, { auth: { kind: "signed", secret: SECRET }, ...opts });
  const server = serveTest(router.fetch);
  try {
    await fn({
      client,
      base: server.url,
      url: (id, action = "complete") => callbackUrl(server.url, opts.pathPrefix, id, action),
    });
  } finally {
    await server.close();
    await drop();
  }
}

/** A JSON body of exactly `n` bytes. */
function jsonOfSize(n: number): string {
  const head = `{"payload":"`;
  return head + "x".repeat(n - head.length - 2) + `"}`;
}

/** A body streamed in chunks without Content-Length. */
function streamOf(bytes: number): ReadableStream<Uint8Array> {
  let left = bytes;
  return new ReadableStream({
    pull(c) {
      if (left <= 0) return c.close();
      const n = Math.min(left, 64 * 1024);
      left -= n;
      c.enqueue(new Uint8Array(n).fill(0x20));
    },
  });
}

Deno.test("signed receiver: each step of the check order answers its status and code", async (t) => {
  await withReceiver({}, async ({ client, url }) => {
    const unknown = crypto.randomUUID();
    const big = "x".repeat(MAX_CALLBACK_BODY_BYTES + 1);

    await t.step("401 missing_signature comes before the id, size and body checks", async () => {
      for (
        const [id, body] of [[unknown, { payload: 1 }], ["not-a-uuid", { payload: 1 }], [
          unknown,
          big,
        ]] as const
      ) {
        const r = await post(url(id), body);
        assert.equal(r.status, 401);
        assert.deepEqual(r.body.code, "missing_signature");
        assert.equal(typeof r.body.error, "string");
      }
    });

    await t.step("401 invalid_signature: wrong key, wrong id, too short, not hex, empty", async () => {
      const bad = [
        sign(OTHER, unknown),
        sign(SECRET, crypto.randomUUID()),
        sign(SECRET, unknown).slice(0, 63),
        sign(SECRET, unknown) + "0",
        "z".repeat(64),
        "",
      ];
      for (const sig of bad) {
        const r = await post(url(unknown), { payload: 1 }, { [SIGNATURE_HEADER]: sig });
        assert.equal(r.status, 401, `signature ${JSON.stringify(sig)}`);
        assert.equal(r.body.code, "invalid_signature");
      }
      const r = await post(url("not-a-uuid"), big, { [SIGNATURE_HEADER]: sign(OTHER, "not-a-uuid") });
      assert.equal(r.body.code, "invalid_signature", "the signature is checked before the id");
    });

    await t.step("400 invalid_callback_id before the size check", async () => {
      for (const id of ["not-a-uuid", "1234", unknown.slice(0, 35), `${unknown}0`]) {
        const r = await post(url(id), big, signed(id));
        assert.equal(r.status, 400, id);
        assert.equal(r.body.code, "invalid_callback_id");
      }
    });

    await t.step(
      "413 payload_too_large counts bytes (with and without Content-Length), before the JSON check",
      async () => {
        let r = await post(url(unknown), big, signed(unknown));
        assert.equal(r.status, 413);
        assert.equal(r.body.code, "payload_too_large");
        r = await post(url(unknown), streamOf(MAX_CALLBACK_BODY_BYTES + 1), signed(unknown));
        assert.equal(r.status, 413, "streamed body without Content-Length");
        assert.equal(r.body.code, "payload_too_large");
        r = await post(url(unknown), streamOf(3 * MAX_CALLBACK_BODY_BYTES), signed(unknown));
        assert.equal(r.status, 413);
        // Exactly 1 MiB is accepted and reaches the lookup.
        r = await post(url(unknown), jsonOfSize(MAX_CALLBACK_BODY_BYTES), signed(unknown));
        assert.equal(r.status, 404);
        assert.equal(r.body.code, "callback_not_found");
      },
    );

    await t.step("400 invalid_body before the lookup, whatever the Content-Type", async () => {
      const cases: [("complete" | "fail" | "heartbeat"), string][] = [
        ["complete", "{not json"],
        ["complete", "[1,2]"],
        ["complete", "42"],
        ["complete", "null"],
        ["fail", ""],
        ["fail", "{}"],
        ["fail", `{"error": 5}`],
        ["fail", `{"error": "x", "retryable": "yes"}`],
        ["heartbeat", ""],
        ["heartbeat", "{}"],
        ["heartbeat", `{"timeout_seconds": 0}`],
        ["heartbeat", `{"timeout_seconds": 1.5}`],
        ["heartbeat", `{"timeout_seconds": "60"}`],
        ["heartbeat", `{"timeout_seconds": 2592001}`],
      ];
      for (const [action, body] of cases) {
        const r = await post(url(unknown, action), body, {
          ...signed(unknown),
          "content-type": "text/plain",
        });
        assert.equal(r.status, 400, `${action} ${body}`);
        assert.equal(r.body.code, "invalid_body");
      }
      const r = await post(url(unknown), new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), signed(unknown));
      assert.equal(r.body.code, "invalid_body", "not UTF-8");
    });

    await t.step("404 callback_not_found for a well-formed unknown id", async () => {
      for (
        const [action, body] of [["complete", {}], ["fail", { error: "x" }], ["heartbeat", {
          timeout_seconds: 5,
        }]] as const
      ) {
        const r = await post(url(unknown, action), body, signed(unknown));
        assert.equal(r.status, 404);
        assert.equal(r.body.code, "callback_not_found");
      }
    });

    await t.step("200 complete: the job is completed with the payload (uppercase hex accepted)", async () => {
      const { job, callbackId } = await pendingCallback(client);
      const r = await post(url(callbackId), { payload: { width: 640 } }, {
        [SIGNATURE_HEADER]: sign(SECRET, callbackId).toUpperCase(),
      });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { job_id: job.id, callback_id: callbackId, state: "completed" });
      const after = (await client.getJob(job.id))!;
      assert.equal(after.state, "completed");
      assert.deepEqual(after.result, { width: 640 });
      assert.equal((await client.getCallback(callbackId))!.state, "completed");

      const again = await post(url(callbackId), { payload: 2 }, signed(callbackId));
      assert.equal(again.status, 409, "a second resolution");
      assert.equal(again.body.code, "callback_not_pending");
    });

    await t.step("200 complete with an empty body: no payload, result null", async () => {
      const { job, callbackId } = await pendingCallback(client);
      const r = await post(url(callbackId), "", signed(callbackId));
      assert.equal(r.status, 200);
      assert.equal((await client.getJob(job.id))!.result, null);
    });

    await t.step("200 fail: terminal by default, retryable on request", async () => {
      const a = await pendingCallback(client);
      let r = await post(url(a.callbackId, "fail"), { error: "model crashed" }, signed(a.callbackId));
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { job_id: a.job.id, callback_id: a.callbackId, state: "failed" });
      let job = (await client.getJob(a.job.id))!;
      assert.equal(job.state, "failed");
      assert.equal(job.errors.at(-1)!.error, "model crashed");
      assert.equal(job.errors.at(-1)!.terminal, true);

      const b = await pendingCallback(client);
      r = await post(url(b.callbackId, "fail"), { error: "busy", retryable: true }, signed(b.callbackId));
      assert.equal(r.status, 200);
      assert.equal(r.body.state, "retryable");
      job = (await client.getJob(b.job.id))!;
      assert.equal(job.state, "retryable");
      assert.equal(job.errors.at(-1)!.terminal, false);
      assert.ok(job.runAt > new Date(), "retried later, with backoff");

      const c = await pendingCallback(client, { maxAttempts: 1 });
      r = await post(url(c.callbackId, "fail"), { error: "busy", retryable: true }, signed(c.callbackId));
      assert.equal(r.body.state, "failed", "retryable but no attempts left");
    });

    await t.step("200 heartbeat resets the deadline to now + timeout_seconds", async () => {
      const { job, callbackId } = await pendingCallback(client, { timeoutMs: 5_000 });
      const before = Date.now();
      const r = await post(url(callbackId, "heartbeat"), { timeout_seconds: 600 }, signed(callbackId));
      assert.equal(r.status, 200);
      assert.equal(r.body.job_id, job.id);
      assert.equal(r.body.callback_id, callbackId);
      assert.equal(r.body.state, "waiting_external");
      const at = Date.parse(r.body.timeout_at);
      assert.ok(Math.abs(at - (before + 600_000)) < 60_000, `timeout_at ${r.body.timeout_at}`);
      assert.equal((await client.getCallback(callbackId))!.deadlineAt.getTime(), at);
      assert.equal((await client.getJob(job.id))!.callbackTimeoutAt!.getTime(), at);
      // A reset, not an addition: a shorter heartbeat brings the deadline closer.
      const r2 = await post(url(callbackId, "heartbeat"), { timeout_seconds: 60 }, signed(callbackId));
      assert.ok(Date.parse(r2.body.timeout_at) < at);
    });

    await t.step(
      "409 callback_not_pending: past its deadline (not yet expired), superseded, job cancelled",
      async () => {
        const late = await pendingCallback(client, { timeoutMs: 1 });
        await new Promise((r) => setTimeout(r, 20));
        let r = await post(url(late.callbackId), { payload: 1 }, signed(late.callbackId));
        assert.equal(r.status, 409);
        assert.equal(r.body.code, "callback_not_pending");
        assert.equal(
          (await client.getCallback(late.callbackId))!.state,
          "pending",
          "no leader has expired it yet",
        );
        assert.equal((await client.getJob(late.job.id))!.state, "waiting_external");

        const old = await pendingCallback(client, { park: false });
        const newer = await client.engine.registerCallback({
          id: old.job.id,
          lease: old.job.lease,
          timeoutMs: 60_000,
          kind: "http",
        });
        r = await post(url(old.callbackId), {}, signed(old.callbackId));
        assert.equal(r.status, 409);
        assert.equal((await client.getCallback(old.callbackId))!.state, "superseded");
        r = await post(url(newer!), {}, signed(newer!));
        assert.equal(r.status, 200, "the newer callback still works");

        const gone = await pendingCallback(client);
        await client.cancel(gone.job.id);
        r = await post(url(gone.callbackId, "heartbeat"), { timeout_seconds: 5 }, signed(gone.callbackId));
        assert.equal(r.status, 409);
        assert.equal(r.body.code, "callback_not_pending");
      },
    );

    await t.step(
      "a complete while the attempt is still running (before the worker parks) completes the job",
      async () => {
        const { job, callbackId } = await pendingCallback(client, { park: false });
        const r = await post(url(callbackId), { payload: "early" }, signed(callbackId));
        assert.equal(r.status, 200);
        assert.equal(r.body.state, "completed");
        assert.equal(
          await client.engine.park({ id: job.id, lease: job.lease, callbackId }),
          false,
          "nothing left to park",
        );
        assert.equal((await client.getJob(job.id))!.state, "completed");
      },
    );
  });
});

Deno.test("unsigned receiver ignores the signature header and keeps the other checks", async () => {
  await withReceiver({ auth: { kind: "unsigned" } }, async ({ client, url }) => {
    const a = await pendingCallback(client);
    let r = await post(url(a.callbackId), { payload: { ok: 1 } });
    assert.equal(r.status, 200);
    assert.equal(r.body.state, "completed");
    const b = await pendingCallback(client);
    r = await post(url(b.callbackId), { payload: 2 }, { [SIGNATURE_HEADER]: "garbage" });
    assert.equal(r.status, 200, "a wrong header is ignored");

    const unknown = crypto.randomUUID();
    assert.equal((await post(url("nope"), {})).body.code, "invalid_callback_id");
    assert.equal(
      (await post(url(unknown), "x".repeat(MAX_CALLBACK_BODY_BYTES + 1))).body.code,
      "payload_too_large",
    );
    assert.equal((await post(url(unknown), "{")).body.code, "invalid_body");
    assert.equal((await post(url(unknown), {})).body.code, "callback_not_found");
    r = await post(url(a.callbackId, "fail"), { error: "late" });
    assert.equal(r.status, 409);
    assert.equal(r.body.code, "callback_not_pending");
  });
});

Deno.test("read-only receiver answers 503 read_only before every other check", async () => {
  for (const auth of [{ kind: "signed", secret: SECRET } as const, { kind: "unsigned" } as const]) {
    await withReceiver({ auth, readOnly: true }, async ({ client, url }) => {
      const { job, callbackId } = await pendingCallback(client);
      const cases: [string, unknown, Record<string, string>][] = [
        [url(callbackId), { payload: 1 }, signed(callbackId)],
        [url(callbackId), { payload: 1 }, {}],
        [url("not-a-uuid", "fail"), "x".repeat(MAX_CALLBACK_BODY_BYTES + 1), {}],
        [url(crypto.randomUUID(), "heartbeat"), "{", { [SIGNATURE_HEADER]: "bad" }],
      ];
      for (const [u, body, headers] of cases) {
        const r = await post(u, body, headers);
        assert.equal(r.status, 503, `${auth.kind} ${u}`);
        assert.equal(r.body.code, "read_only");
      }
      assert.equal((await client.getJob(job.id))!.state, "waiting_external", "nothing written");
    });
  }
});

Deno.test("only the three POST routes: 404 not_found for other paths, 405 for other methods, no CORS", async () => {
  await withReceiver({}, async ({ base, url }) => {
    const id = crypto.randomUUID();
    for (
      const path of [
        "/",
        "/api/jobs",
        "/api/callbacks",
        "/api/callbacks/",
        `/api/callbacks/${id}`,
        `/api/callbacks/${id}/resume`,
        `/api/callbacks/${id}/complete/extra`,
        `/api/callbacks/${id}/complete//`,
        `/api/callbacks//complete`,
        `/index.html`,
      ]
    ) {
      for (const method of ["POST", "GET"]) {
        const r = await post(base + path, method === "GET" ? undefined : {}, signed(id), method);
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.body.code, "not_found");
      }
    }
    for (const method of ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
      const res = await fetch(url(id), {
        method,
        headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
      });
      const body = await res.json();
      assert.equal(res.status, 405, method);
      assert.equal(body.code, "method_not_allowed");
      assert.equal(res.headers.get("allow"), "POST");
      for (const [h] of res.headers) {
        assert.ok(!h.startsWith("access-control-"), `${method}: no CORS header ${h}`);
      }
    }
    const r = await post(url(id), {}, { ...signed(id), origin: "https://evil.example" });
    for (const [h] of r.headers) assert.ok(!h.startsWith("access-control-"), `no CORS header ${h}`);
    // A trailing slash is ignored: the route answers (here: unknown callback).
    const slash = await post(`${url(id)}/`, {}, signed(id));
    assert.equal(slash.status, 404);
    assert.equal(slash.body.code, "callback_not_found");
  });
});

Deno.test("path prefixes are normalized; a request for another prefix gets 404 not_found", async () => {
  await withReceiver({ pathPrefix: "hooks/svc/" }, async ({ client, base, url }) => {
    const { callbackId } = await pendingCallback(client);
    assert.ok(url(callbackId).startsWith(`${base}/hooks/svc/`));
    const wrong = await post(callbackUrl(base, undefined, callbackId), {}, signed(callbackId));
    assert.equal(wrong.status, 404);
    assert.equal(wrong.body.code, "not_found");
    assert.match(wrong.body.error, /hooks\/svc/);
    const ok = await post(url(callbackId), {}, signed(callbackId));
    assert.equal(ok.status, 200);
  });
  await withReceiver({ pathPrefix: "" }, async ({ client, base }) => {
    const { callbackId } = await pendingCallback(client);
    const r = await post(`${base}/${callbackId}/complete`, {}, signed(callbackId));
    assert.equal(r.status, 200, "an empty prefix mounts the routes at the root");
  });
});

Deno.test("200 concurrent completes of one callback: exactly one 200, the rest 409, one completion", async () => {
  await withReceiver({}, async ({ client, url }) => {
    const { job, callbackId } = await pendingCallback(client);
    const results = await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) => post(url(callbackId), { payload: { winner: i } }, signed(callbackId)),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    const conflict = results.filter((r) => r.status === 409);
    assert.equal(ok.length, 1, `statuses: ${[...new Set(results.map((r) => r.status))]}`);
    assert.equal(conflict.length, 199);
    assert.ok(conflict.every((r) => r.body.code === "callback_not_pending"));
    const winner = results.findIndex((r) => r.status === 200);
    const after = (await client.getJob(job.id))!;
    assert.equal(after.state, "completed");
    assert.deepEqual(after.result, { winner });
    const cbs = await client.listCallbacks(job.id);
    assert.equal(cbs.length, 1);
    assert.equal(cbs[0].state, "completed");
    assert.deepEqual(cbs[0].payload, { winner });
  });
});

Deno.test("a database fault is 500 internal: details go to the log, not to the caller", async () => {
  // A client whose schema was never migrated: resolve_callback does not exist.
  const client = createClient({
    databaseUrl: Deno.env.get("TEST_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres",
    schema: "svct_missing_schema_router",
    maxConnections: 1,
  });
  const logged: string[] = [];
  const router = createCallbackRouter(client, {
    auth: { kind: "unsigned" },
    logger: { error: (...a: unknown[]) => logged.push(a.join(" ")) },
  });
  const server = serveTest(router.fetch);
  try {
    const r = await post(callbackUrl(server.url, undefined, crypto.randomUUID()), { payload: 1 });
    assert.equal(r.status, 500);
    assert.equal(r.body.code, "internal");
    assert.doesNotMatch(r.body.error, /svct_missing_schema_router|resolve_callback|does not exist/);
    assert.equal(logged.length, 1);
    assert.match(logged[0], /svct_missing_schema_router|does not exist/);
  } finally {
    await server.close();
    await client.close();
  }
});

Deno.test("createCallbackRouter: auth is required and checked; handle() falls through outside the prefix", async () => {
  const client = createClient({ databaseUrl: `postgres://127.0.0.1:${closedPort()}/x`, maxConnections: 1 });
  try {
    assert.throws(() => createCallbackRouter(client, {} as any), /auth must be/);
    assert.throws(
      () => createCallbackRouter(client, { auth: { kind: "signed", secret: new Uint8Array(16) } }),
      /parseSecret/,
    );
    const router = createCallbackRouter(client, { auth: { kind: "unsigned" }, pathPrefix: "/cb/" });
    assert.equal(router.pathPrefix, "/cb");
    assert.equal(await router.handle(new Request("http://x/api/jobs", { method: "POST" })), null);
    const res = await router.handle(new Request("http://x/cb/nope", { method: "POST" }));
    assert.equal(res!.status, 404);
    await res!.body?.cancel();
  } finally {
    await client.close();
  }
});

Deno.test("refused requests naming a pending callback are counted on it (count and last refusal), and shown by svc job get", async () => {
  await withReceiver({}, async ({ client, url }) => {
    const { job, callbackId } = await pendingCallback(client);
    const before = (await client.engine.getCallback(callbackId))!;
    assert.equal(before.rejectedCount, 0);
    assert.equal(before.lastRejection, null);
    // A missing and a wrong signature, a body that is not JSON, one too large: four refusals.
    assert.equal((await post(url(callbackId), {})).status, 401);
    assert.equal(
      (await post(url(callbackId), {}, { [SIGNATURE_HEADER]: sign(OTHER, callbackId) })).status,
      401,
    );
    assert.equal((await post(url(callbackId), "{not json", signed(callbackId))).status, 400);
    assert.equal(
      (await post(url(callbackId), jsonOfSize(MAX_CALLBACK_BODY_BYTES + 1), signed(callbackId))).status,
      413,
    );
    // Not counted: an unknown callback, an id that is not a UUID (and so names none).
    const unknown = crypto.randomUUID();
    assert.equal((await post(url(unknown), {}, signed(unknown))).status, 404);
    assert.equal((await post(url("nope"), {}, signed("nope"))).status, 400);
    const after = (await client.engine.getCallback(callbackId))!;
    assert.equal(after.rejectedCount, 4);
    assert.equal(after.lastRejection?.status, 413);
    assert.equal(after.lastRejection?.code, "payload_too_large");
    assert.ok(Math.abs(Date.parse(after.lastRejection!.at) - Date.now()) < 60_000);
    assert.equal(after.state, "pending", "a refusal changes nothing else");
    // The text of svc job get names them; the JSON carries the callbacks.
    const text = await svcIn(client.schema, ["job", "get", String(job.id)]);
    assert.match(
      text.stdout,
      new RegExp(`${callbackId} pending .*4 request\\(s\\) refused, last 413 payload_too_large`),
    );
    const js = JSON.parse((await svcIn(client.schema, ["job", "get", String(job.id), "--json"])).stdout);
    assert.equal(js.callbacks[0].rejected_count, 4);
    // Once the callback is resolved, refusals naming it are no longer counted.
    assert.equal((await post(url(callbackId), { payload: 1 }, signed(callbackId))).status, 200);
    assert.equal(
      (await post(url(callbackId), {}, { [SIGNATURE_HEADER]: sign(OTHER, callbackId) })).status,
      401,
    );
    assert.equal((await client.engine.getCallback(callbackId))!.rejectedCount, 4);
  });
});

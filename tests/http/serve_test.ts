/**
 * The router of `svc serve` beyond single routes: read-only mode on every mutating route of the
 * table, CORS, the UI's static files and fallback, `/api/openapi.json`, and the callback receiver
 * answering exactly like the one of `svc callbacks serve`.
 */
import assert from "node:assert/strict";
import { parseSecret, sign } from "../../src/contract/signature.ts";
import { type CallbackAuth, createCallbackRouter } from "../../src/http/callback_router.ts";
import { ADMIN_ROUTES } from "../../src/http/admin_api/routes.ts";
import { openApiPath } from "../../src/http/openapi.ts";
import {
  type AdminFixture,
  type adminFixture,
  send,
  setState,
  withApi as withAdmin,
} from "../helpers/admin.ts";
import { pendingCallback } from "../helpers/http.ts";

/** The shared helper, with the options first (as this file's tests read). */
function withApi(
  opts: Parameters<typeof adminFixture>[0],
  fn: (f: AdminFixture) => Promise<void>,
): Promise<void> {
  return withAdmin(fn, opts);
}

/** A concrete path for a route: `:id` → a number, `:callback_id` → a UUID, other params → a name. */
function concrete(path: string, callbackId = crypto.randomUUID()): string {
  return "/api" +
    path.replace(":callback_id", callbackId).replace(":id", "999999").replace(/:[a-z_]+/g, "nightly");
}

Deno.test("read-only: every mutating route of the table answers 503 read_only before any other check", () =>
  withApi({ readOnly: true }, async ({ client, call }) => {
    const job = await client.enqueue("k", {}, { queue: "q" });
    const mutating = ADMIN_ROUTES.filter((r) => r.mutates);
    assert.deepEqual(mutating.map((r) => r.path).sort(), [
      "/callbacks/:callback_id/complete",
      "/callbacks/:callback_id/fail",
      "/callbacks/:callback_id/heartbeat",
      "/cron/:name/pause",
      "/cron/:name/resume",
      "/cron/:name/trigger",
      "/jobs",
      "/jobs/:id",
      "/jobs/:id/cancel",
      "/jobs/:id/retry",
      "/jobs/bulk-cancel",
      "/jobs/bulk-delete",
      "/jobs/bulk-retry",
      "/queues/:name/limit",
      "/queues/:name/limit",
      "/queues/:name/pause",
      "/queues/:name/resume",
    ]);
    assert.ok(
      mutating.every((r) =>
        r.method === "POST" ||
        (r.method === "DELETE" && ["/jobs/:id", "/queues/:name/limit"].includes(r.path)) ||
        (r.method === "PUT" && r.path === "/queues/:name/limit")
      ),
    );
    // Beside the reads, only the login form's session routes are POSTs that change no job.
    assert.deepEqual(
      ADMIN_ROUTES.filter((r) => !r.mutates && r.method !== "GET").map((r) => r.path).sort(),
      ["/login", "/logout"],
    );
    for (const r of mutating) {
      // Missing jobs, malformed bodies and signatures would all be other errors: 503 comes first.
      for (const body of [undefined, "{not json", { state: "bogus" }]) {
        const a = await call(r.method, concrete(r.path), body);
        assert.equal(a.status, 503, `${r.method} ${r.path} ${JSON.stringify(body)}: ${a.text}`);
        assert.equal(a.body.code, "read_only");
        assert.equal(typeof a.body.error, "string");
      }
    }
    // The real job and queue are untouched.
    for (const p of [`/api/jobs/${job.id}/cancel`, "/api/queues/q/pause", "/api/jobs/bulk-cancel"]) {
      assert.equal((await call("POST", p, {})).status, 503);
    }
    assert.equal((await client.getJob(job.id))!.state, "available");
    assert.equal((await client.listQueues())[0].paused, false);
    // Reads still work, and capabilities say read-only.
    assert.deepEqual((await call("GET", "/api/capabilities")).body.read_only, true);
    for (const r of ADMIN_ROUTES.filter((r) => r.method === "GET" && !r.path.includes(":"))) {
      assert.equal((await call("GET", "/api" + r.path)).status, 200, r.path);
    }
  }));

Deno.test("read-only: a callback that would succeed is refused with 503 and the job stays waiting", () =>
  withApi({ readOnly: true }, async ({ client, call }) => {
    const { job, callbackId } = await pendingCallback(client);
    const a = await call("POST", `/api/callbacks/${callbackId}/complete`, { payload: 1 });
    assert.equal(a.status, 503);
    assert.equal(a.body.code, "read_only");
    assert.equal((await client.getJob(job.id))!.state, "waiting_external");
  }));

Deno.test("CORS: any origin by default on API answers (errors included); preflight answered", () =>
  withApi({}, async ({ call }) => {
    const origin = { origin: "https://elsewhere.example" };
    for (const [m, p] of [["GET", "/api/stats"], ["GET", "/api/jobs/123"], ["POST", "/api/jobs/1/retry"]]) {
      const a = await call(m, p, undefined, origin);
      assert.equal(a.headers.get("access-control-allow-origin"), "*", `${m} ${p} ${a.status}`);
    }
    const pre = await call("OPTIONS", "/api/jobs/1/retry", undefined, {
      ...origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type",
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), "*");
    assert.match(pre.headers.get("access-control-allow-methods")!, /POST/);
    assert.match(pre.headers.get("access-control-allow-headers")!, /Content-Type/i);
    assert.match(pre.headers.get("access-control-allow-headers")!, /X-Service-Signature/i);
    const cb = await call("OPTIONS", `/api/callbacks/${crypto.randomUUID()}/complete`, undefined, {
      ...origin,
      "access-control-request-method": "POST",
    });
    assert.equal(cb.status, 204);
    assert.equal(cb.headers.get("access-control-allow-origin"), "*");
    const cbPost = await call("POST", `/api/callbacks/${crypto.randomUUID()}/complete`, {}, origin);
    assert.equal(cbPost.status, 404);
    assert.equal(cbPost.headers.get("access-control-allow-origin"), "*");
  }));

Deno.test("CORS: corsOrigins restricts the allowed origins (echoed with Vary: Origin)", () =>
  withApi({ corsOrigins: ["https://admin.example.com", "http://127.0.0.1:5173"] }, async ({ call }) => {
    const ok = await call("GET", "/api/stats", undefined, { origin: "https://admin.example.com" });
    assert.equal(ok.headers.get("access-control-allow-origin"), "https://admin.example.com");
    assert.match(ok.headers.get("vary") ?? "", /Origin/);
    const ok2 = await call("GET", "/api/stats", undefined, { origin: "http://127.0.0.1:5173" });
    assert.equal(ok2.headers.get("access-control-allow-origin"), "http://127.0.0.1:5173");

    const other = await call("GET", "/api/stats", undefined, { origin: "https://evil.example" });
    assert.equal(other.status, 200);
    assert.equal(other.headers.get("access-control-allow-origin"), null);
    const pre = await call("OPTIONS", "/api/jobs", undefined, {
      origin: "https://evil.example",
      "access-control-request-method": "POST",
    });
    assert.equal(pre.headers.get("access-control-allow-origin"), null);
    const preOk = await call("OPTIONS", "/api/jobs", undefined, {
      origin: "https://admin.example.com",
      "access-control-request-method": "POST",
    });
    assert.equal(preOk.headers.get("access-control-allow-origin"), "https://admin.example.com");
    const cb = await call("POST", `/api/callbacks/${crypto.randomUUID()}/complete`, {}, {
      origin: "https://evil.example",
    });
    assert.equal(cb.headers.get("access-control-allow-origin"), null);
  }));

Deno.test("UI: index.html at /, the bundle files, client-side routes fall back to index.html", () =>
  withApi({}, async ({ call }) => {
    const index = await call("GET", "/");
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-type")!, /^text\/html/);
    assert.match(index.text, /<div id="app">/);
    assert.ok(index.headers.get("content-security-policy"));
    assert.equal(index.headers.get("access-control-allow-origin"), null, "no CORS outside /api");

    const js = await call("GET", "/app.js");
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type")!, /^text\/javascript/);
    const css = await call("GET", "/app.css?v=123");
    assert.match(css.headers.get("content-type")!, /^text\/css/);

    for (
      const p of [
        "/jobs",
        "/jobs/42",
        "/queues?x=1",
        "/cron/",
        "/runtimes",
        "/index.html",
        "/some/unknown/page",
      ]
    ) {
      const a = await call("GET", p);
      assert.equal(a.status, 200, p);
      assert.equal(a.text, index.text, p);
    }
    // Paths outside ui/dist never reach the disk.
    for (const p of ["/%2e%2e/deno.json", "/..%2fdeno.json", "/.hidden", "/%2e%2e/%2e%2e/etc/passwd"]) {
      const a = await call("GET", p);
      assert.equal(a.text, index.text, p);
    }
    const head = await call("HEAD", "/app.js");
    assert.equal(head.status, 200);
    assert.equal(head.text, "");
    const etag = js.headers.get("etag")!;
    assert.equal((await call("GET", "/app.js", undefined, { "if-none-match": etag })).status, 304);
    const post = await call("POST", "/");
    assert.equal(post.status, 405);
    assert.equal(post.body.code, "method_not_allowed");
  }));

Deno.test("UI: a missing ui/dist answers 404 saying so, and the API still works", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await withApi({ uiDistUrl: new URL(`file://${dir}/`) }, async ({ call }) => {
      const a = await call("GET", "/jobs");
      assert.equal(a.status, 404);
      assert.match(a.text, /admin UI is not built/);
      assert.equal((await call("GET", "/api/stats")).status, 200);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("GET /api/openapi.json describes every route of the table, generated from it", () =>
  withApi({}, async ({ call }) => {
    const a = await call("GET", "/api/openapi.json");
    assert.equal(a.status, 200);
    const doc = a.body;
    assert.equal(doc.openapi, "3.1.0");
    const ops = Object.values(doc.paths).flatMap((p: any) => Object.keys(p));
    assert.equal(ops.length, ADMIN_ROUTES.length);
    const ids = new Set<string>();
    for (const r of ADMIN_ROUTES) {
      const op = doc.paths[openApiPath(r.path)]?.[r.method.toLowerCase()];
      assert.ok(op, `${r.method} ${r.path} documented`);
      assert.equal(op.summary, r.summary);
      ids.add(op.operationId);
      const pathParams = [...r.path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]);
      assert.deepEqual(
        (op.parameters ?? []).filter((p: any) => p.in === "path").map((p: any) => p.name),
        pathParams,
      );
      assert.ok(op.responses[String(r.status ?? 200)], "success answer");
      if (r.mutates) assert.ok(op.responses["503"], `${r.path} documents 503 read_only`);
      assert.ok(op.responses["500"]);
    }
    assert.equal(ids.size, ADMIN_ROUTES.length, "operation ids are unique");
    for (
      const p of [
        "/api/jobs",
        "/api/stats",
        "/api/queues/{name}/pause",
        "/api/callbacks/{callback_id}/complete",
      ]
    ) {
      assert.ok(doc.paths[p], p);
    }
    const list = doc.paths["/api/jobs"].get.parameters.map((p: any) => p.name);
    assert.deepEqual(list, ["state", "kind", "queue", "tag", "q", "limit", "cursor"]);
    // Every $ref resolves.
    const refs = JSON.stringify(doc).match(/#\/components\/schemas\/[A-Za-z]+/g)!;
    for (const ref of new Set(refs)) assert.ok(doc.components.schemas[ref.split("/").pop()!], ref);
  }));

/** The answer with this call's ids replaced, so two receivers' answers compare equal. */
function normalize(a: { status: number; text: string; headers: Headers }, uuids: string[]): unknown {
  let t = a.text;
  for (const id of uuids) t = t.replaceAll(id, "<id>");
  t = t.replace(/"job_id":\d+/, '"job_id":0').replace(/"timeout_at":"[^"]+"/, '"timeout_at":"<t>"');
  return { status: a.status, body: t, type: a.headers.get("content-type"), allow: a.headers.get("allow") };
}

async function parity(auth: CallbackAuth, secret: Uint8Array | null): Promise<void> {
  await withApi({ callbackAuth: auth }, async ({ client, app }) => {
    // The receiver exactly as `svc callbacks serve` builds it (default prefix, no CORS).
    const alone = createCallbackRouter(client, { auth, readOnly: false });
    const sides = [
      { name: "serve", fetch: app.fetch, cb: await pendingCallback(client) },
      { name: "callbacks serve", fetch: (r: Request) => alone.fetch(r), cb: await pendingCallback(client) },
    ];
    const answers = sides.map(() => [] as unknown[]);
    const big = JSON.stringify({ payload: "x".repeat(1024 * 1024) });
    for (const [i, side] of sides.entries()) {
      const id = side.cb.callbackId;
      const sig: Record<string, string> = secret ? { "x-service-signature": sign(secret, id) } : {};
      const unknown = crypto.randomUUID();
      const steps: [string, string, unknown, Record<string, string>][] = [
        [
          "POST",
          `/api/callbacks/not-a-uuid/complete`,
          {},
          secret ? { "x-service-signature": "0".repeat(64) } : {},
        ],
        [
          "POST",
          `/api/callbacks/${unknown}/complete`,
          {},
          secret ? { "x-service-signature": sign(secret, unknown) } : {},
        ],
        ["POST", `/api/callbacks/${id}/complete`, {}, {}],
        ["POST", `/api/callbacks/${id}/complete`, {}, { "x-service-signature": "ab".repeat(32) }],
        ["POST", `/api/callbacks/${id}/heartbeat`, { timeout_seconds: "soon" }, sig],
        ["POST", `/api/callbacks/${id}/fail`, "not json", sig],
        ["POST", `/api/callbacks/${id}/complete`, big, sig],
        ["POST", `/api/callbacks/${id}/heartbeat`, { timeout_seconds: 600 }, sig],
        ["POST", `/api/callbacks/${id}/complete`, { payload: { ok: true } }, sig],
        ["POST", `/api/callbacks/${id}/complete`, { payload: { ok: true } }, sig],
        ["POST", `/api/callbacks/${id}/fail`, { error: "late" }, sig],
        ["GET", `/api/callbacks/${id}/complete`, undefined, sig],
        ["POST", `/api/callbacks/${id}/explode`, {}, sig],
        ["POST", `/api/callbacks/${id}`, {}, sig],
        ["POST", `/api/callbacks`, {}, {}],
      ];
      for (const [m, p, b, h] of steps) {
        const a = await send(side.fetch, m, p, b, h);
        answers[i].push({
          step: `${m} ${p.replace(id, "<cb>").replace(unknown, "<x>")}`,
          ...normalize(a, [id, unknown]) as object,
        });
      }
      assert.equal((await client.getJob(side.cb.job.id))!.state, "completed", side.name);
    }
    assert.deepEqual(answers[0], answers[1]);
    const statuses = (answers[0] as { status: number }[]).map((a) => a.status);
    assert.deepEqual(
      statuses,
      secret
        ? [401, 404, 401, 401, 400, 400, 413, 200, 200, 409, 409, 405, 404, 404, 404]
        : [400, 404, 200, 409, 400, 400, 413, 409, 409, 409, 409, 405, 404, 404, 404],
    );
  });
}

Deno.test("the receiver on serve answers like callbacks serve (signed)", () => {
  const secret = parseSecret("7f".repeat(32));
  return parity({ kind: "signed", secret }, secret);
});

Deno.test("the receiver on serve answers like callbacks serve (unsigned)", () =>
  parity({ kind: "unsigned" }, null));

Deno.test("stats and job lists reflect retries made through the API", () =>
  withApi({}, async ({ client, call }) => {
    const jobs = await client.enqueueMany([{ kind: "a" }, { kind: "a" }]);
    await setState(client, jobs.map((j) => j.id), "failed");
    assert.equal((await call("GET", "/api/stats")).body.counts.failed, 2);
    assert.equal((await call("POST", "/api/jobs/bulk-retry", { state: "failed" })).body.count, 2);
    const s = (await call("GET", "/api/stats")).body.counts;
    assert.deepEqual([s.failed, s.available], [0, 2]);
  }));

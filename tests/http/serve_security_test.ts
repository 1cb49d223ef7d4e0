/**
 * Cross-site requests and the optional token of `svc serve`, over real HTTP on 127.0.0.1: reads stay
 * permissive; a mutation from a foreign Origin is 403 `cross_origin` unless listed; with a token every
 * `/api` route except the callbacks and `/api/capabilities` needs `Authorization: Bearer` or the UI's
 * session cookie (401 `unauthorized`, `WWW-Authenticate: Bearer`). Order: read_only, cross_origin,
 * unauthorized, then the rest.
 */
import assert from "node:assert/strict";
import { type AdminFixture, adminFixture } from "../helpers/admin.ts";
import { pendingCallback, serveTest } from "../helpers/http.ts";
import type { AdminServerOptions } from "../../src/http/server.ts";

const TOKEN = "s3cret-token-for-tests-0123456789";
const EVIL = "https://evil.example";

async function withServer(
  opts: Partial<AdminServerOptions>,
  fn: (
    f: AdminFixture,
    req: (method: string, path: string, headers?: Record<string, string>, body?: unknown) => Promise<{
      status: number;
      body: any;
      headers: Headers;
    }>,
    base: string,
  ) => Promise<void>,
): Promise<void> {
  const f = await adminFixture(opts);
  const server = serveTest(f.app.fetch);
  try {
    await fn(f, async (method, path, headers = {}, body) => {
      const res = await fetch(server.url + path, {
        method,
        headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      const isJson = res.headers.get("content-type")?.startsWith("application/json");
      return { status: res.status, body: isJson ? JSON.parse(text) : text, headers: res.headers };
    }, server.url);
  } finally {
    await server.close();
    await f.drop();
  }
}

Deno.test("cross-site: a mutation from a foreign Origin is 403 cross_origin and changes nothing; reads, no Origin, the own origin and listed origins pass", () =>
  withServer({ corsOrigins: ["https://admin.example.com"] }, async ({ client }, req, base) => {
    const job = await client.enqueue("k", {});
    for (const origin of [EVIL, "null", "http://127.0.0.1:1", base.replace("http:", "https:")]) {
      const r = await req("POST", `/api/jobs/${job.id}/cancel`, { origin });
      assert.equal(r.status, 403, `${origin}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "cross_origin");
      assert.match(r.body.error, /--cors-origin/);
    }
    const enq = await req("POST", "/api/jobs", { origin: EVIL }, { kind: "x" });
    assert.equal(enq.status, 403);
    assert.equal((await req("POST", "/api/queues/ghost/pause?create=true", { origin: EVIL })).status, 403);
    assert.equal((await client.getJob(job.id))!.state, "available", "nothing changed");
    assert.equal((await client.listJobs()).jobs.length, 1);

    // Reads stay permissive, whatever the origin.
    const read = await req("GET", "/api/jobs", { origin: EVIL });
    assert.equal(read.status, 200);
    // No Origin (curl, the CLI), the server's own origin, a listed origin, a proxy's https origin.
    assert.equal((await req("POST", "/api/jobs", {}, { kind: "a" })).status, 201);
    assert.equal((await req("POST", "/api/jobs", { origin: base }, { kind: "b" })).status, 201);
    assert.equal(
      (await req("POST", "/api/jobs", { origin: "https://admin.example.com" }, { kind: "c" })).status,
      201,
    );
    assert.equal(
      (await req("POST", "/api/jobs", {
        origin: base.replace("http:", "https:"),
        "x-forwarded-proto": "https",
      }, { kind: "d" })).status,
      201,
    );
    assert.equal((await req("POST", `/api/jobs/${job.id}/cancel`, { origin: base })).status, 200);

    // The callback routes keep their own checks (here: unknown callback), whatever the origin.
    const cb = await req("POST", `/api/callbacks/${crypto.randomUUID()}/complete`, { origin: EVIL }, {});
    assert.equal(cb.status, 404);
    assert.equal(cb.body.code, "callback_not_found");
  }));

Deno.test("cross-site: read_only comes before cross_origin, cross_origin before unauthorized", async () => {
  await withServer({ readOnly: true, authToken: TOKEN }, async (_f, req) => {
    const r = await req("POST", "/api/jobs", { origin: EVIL }, { kind: "k" });
    assert.equal(r.status, 503);
    assert.equal(r.body.code, "read_only");
  });
  await withServer({ authToken: TOKEN }, async (_f, req) => {
    const r = await req("POST", "/api/jobs", { origin: EVIL }, { kind: "k" });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, "cross_origin");
    const u = await req("POST", "/api/jobs", {}, { kind: "k" });
    assert.equal(u.status, 401);
    assert.equal(u.body.code, "unauthorized");
  });
});

Deno.test("token: every /api route but the callbacks and capabilities needs the bearer token; 401 with WWW-Authenticate", () =>
  withServer({ authToken: TOKEN }, async ({ client }, req) => {
    const job = await client.enqueue("k", {});
    for (
      const [method, path] of [
        ["GET", "/api/jobs"],
        ["GET", `/api/jobs/${job.id}`],
        ["GET", "/api/stats"],
        ["GET", "/api/openapi.json"],
        ["GET", "/api/nope"],
        ["POST", `/api/jobs/${job.id}/cancel`],
        ["POST", "/api/jobs"],
      ]
    ) {
      for (
        const auth of [undefined, "Bearer wrong", `Basic ${btoa("x:" + TOKEN)}`, `Bearer ${TOKEN}x`, "Bearer"]
      ) {
        const r = await req(
          method,
          path,
          auth ? { authorization: auth } : {},
          method === "POST" ? {} : undefined,
        );
        assert.equal(r.status, 401, `${method} ${path} ${auth}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.code, "unauthorized");
        assert.match(r.headers.get("www-authenticate") ?? "", /^Bearer/);
      }
    }
    assert.equal((await client.getJob(job.id))!.state, "available");
    const ok = await req("GET", "/api/jobs", { authorization: `Bearer ${TOKEN}` });
    assert.equal(ok.status, 200);
    assert.equal((await req("GET", "/api/jobs", { authorization: `bearer  ${TOKEN}` })).status, 200);
    const cancel = await req("POST", `/api/jobs/${job.id}/cancel`, { authorization: `Bearer ${TOKEN}` });
    assert.equal(cancel.status, 200);

    // Exempt: capabilities (says a token is needed), the callbacks (signature auth), the UI's files.
    const caps = await req("GET", "/api/capabilities");
    assert.equal(caps.status, 200);
    assert.equal(caps.body.auth_required, true);
    assert.equal(caps.body.authenticated, false);
    const capsIn = await req("GET", "/api/capabilities", { authorization: `Bearer ${TOKEN}` });
    assert.equal(capsIn.body.authenticated, true);
    const { callbackId } = await pendingCallback(client);
    const cb = await req("POST", `/api/callbacks/${callbackId}/complete`, {}, { payload: 1 });
    assert.equal(cb.status, 200, JSON.stringify(cb.body));
    assert.equal((await req("GET", "/")).status, 200);
  }));

Deno.test("token: the login form's session cookie (HttpOnly, SameSite=Strict) authorizes the UI's requests; logout ends it", () =>
  withServer({ authToken: TOKEN }, async (_f, req) => {
    const wrong = await req("POST", "/api/login", {}, { token: "nope" });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.code, "unauthorized");
    assert.equal(wrong.headers.get("set-cookie"), null);
    assert.equal((await req("POST", "/api/login", {}, {})).status, 400);
    assert.equal((await req("POST", "/api/login", { origin: EVIL }, { token: TOKEN })).status, 403);

    const login = await req("POST", "/api/login", {}, { token: TOKEN });
    assert.equal(login.status, 200, JSON.stringify(login.body));
    const cookie = login.headers.get("set-cookie")!;
    assert.match(cookie, /^svc_session=[0-9a-f]{64}; /);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    assert.match(cookie, /Path=\/api/);
    assert.ok(!cookie.includes(TOKEN), "the cookie is not the token itself");
    const session = cookie.split(";")[0];

    assert.equal((await req("GET", "/api/jobs", { cookie: session })).status, 200);
    assert.equal((await req("POST", "/api/jobs", { cookie: session }, { kind: "k" })).status, 201);
    assert.equal((await req("GET", "/api/capabilities", { cookie: session })).body.authenticated, true);
    assert.equal((await req("GET", "/api/jobs", { cookie: "svc_session=" + "0".repeat(64) })).status, 401);

    const logout = await req("POST", "/api/logout", { cookie: session });
    assert.equal(logout.status, 200);
    assert.match(logout.headers.get("set-cookie")!, /^svc_session=; .*Max-Age=0/);
  }));

Deno.test("without a token nothing needs one; capabilities say so", () =>
  withServer({}, async (_f, req) => {
    const caps = await req("GET", "/api/capabilities");
    assert.equal(caps.body.auth_required, false);
    assert.equal(caps.body.authenticated, true);
    assert.equal((await req("GET", "/api/jobs")).status, 200);
  }));

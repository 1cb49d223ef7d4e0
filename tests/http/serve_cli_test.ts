/**
 * `svc serve` as a process: the startup line with the address (port 0 prints the real port), the
 * unsigned warning, the UI served from another working directory, --read-only / SERVICE_READ_ONLY,
 * --cors-origin, refusals, and a clean stop on SIGTERM and SIGINT.
 */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { CLI, SERVE_ENV, startServe } from "../helpers/serve.ts";

async function waitUntil(ok: () => boolean, what: () => string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > until) throw new Error(`timed out; got ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function run(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stderr: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    cwd: "/tmp",
    env: { ...SERVE_ENV, ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: r.code, stderr: new TextDecoder().decode(r.stderr) };
}

Deno.test("svc serve: startup line with the real port, unsigned warning, UI from any cwd, SIGTERM stops it", async () => {
  const { client, schema, drop } = await testClient({ maxConnections: 2 });
  const p = await startServe(schema);
  try {
    assert.match(
      p.startup,
      /^svc serve: open http:\/\/127\.0\.0\.1:\d+\/ \(API under \/api; callbacks unsigned; CORS: any origin reads, changes only from this server's pages; no token\)$/,
    );
    await waitUntil(
      () => p.err.some((l) => /^warning: callbacks are unsigned/.test(l)),
      () => p.err.join("\n"),
    );
    const caps = await (await fetch(`${p.url}/api/capabilities`)).json();
    assert.equal(caps.read_only, false);
    const page = await fetch(`${p.url}/jobs/1`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<div id="app">/);
    const js = await fetch(`${p.url}/app.js`);
    assert.equal(js.status, 200);
    await js.body?.cancel();
    const job = await client.enqueue("k");
    const r = await fetch(`${p.url}/api/jobs/${job.id}/cancel`, { method: "POST" });
    assert.equal(r.status, 200);
    await r.body?.cancel();
  } finally {
    const s = await p.stop("SIGTERM");
    await drop();
    assert.equal(s.code, 0, JSON.stringify({ out: p.out, err: p.err }));
    assert.equal(p.out.at(-1), "svc serve: stopped");
    assert.ok(p.out.some((l) => /^POST \/api\/jobs\/\d+\/cancel 200 \d+ms$/.test(l)), p.out.join("\n"));
  }
});

Deno.test("svc serve: SERVICE_READ_ONLY=1 and --read-only refuse changes with 503; SIGINT stops it", async () => {
  const { client, schema, drop } = await testClient({ maxConnections: 2 });
  const job = await client.enqueue("k");
  try {
    for (const [args, env] of [[[], { SERVICE_READ_ONLY: "1" }], [["--read-only"], {}]] as const) {
      const p = await startServe(schema, [...args], env);
      try {
        assert.match(p.startup, /read-only/);
        assert.equal((await (await fetch(`${p.url}/api/capabilities`)).json()).read_only, true);
        const r = await fetch(`${p.url}/api/jobs/${job.id}/cancel`, { method: "POST" });
        assert.equal(r.status, 503);
        assert.equal((await r.json()).code, "read_only");
      } finally {
        assert.equal((await p.stop("SIGINT")).code, 0);
      }
      // All output is in once it stopped: no unsigned warning, callbacks are refused anyway.
      assert.ok(!p.err.some((l) => /warning/.test(l)), p.err.join("\n"));
    }
    assert.equal((await client.getJob(job.id))!.state, "available");
  } finally {
    await drop();
  }
});

Deno.test("svc serve: --cors-origin (repeatable) restricts CORS; a secret makes callbacks signed", async () => {
  const { schema, drop } = await testClient({ maxConnections: 2 });
  const p = await startServe(schema, [
    "--cors-origin",
    "https://a.example",
    "--cors-origin",
    "https://b.example:8443",
    "--callback-hmac-secret",
    "ab".repeat(32),
  ]);
  try {
    assert.match(
      p.startup,
      /callbacks signed; CORS: https:\/\/a\.example https:\/\/b\.example:8443; no token\)$/,
    );
    const get = async (origin: string) => {
      const r = await fetch(`${p.url}/api/stats`, { headers: { origin } });
      await r.body?.cancel();
      return r.headers.get("access-control-allow-origin");
    };
    assert.equal(await get("https://a.example"), "https://a.example");
    assert.equal(await get("https://b.example:8443"), "https://b.example:8443");
    assert.equal(await get("https://c.example"), null);
    const cb = await fetch(`${p.url}/api/callbacks/${crypto.randomUUID()}/complete`, {
      method: "POST",
      body: "{}",
    });
    assert.equal(cb.status, 401);
    assert.equal((await cb.json()).code, "missing_signature");
  } finally {
    assert.equal((await p.stop()).code, 0);
    await drop();
  }
  assert.ok(!p.err.some((l) => /warning/.test(l)), p.err.join("\n"));
});

Deno.test("svc serve: --auth-token / SERVICE_AUTH_TOKEN require the token on /api; a foreign page's change is 403", async () => {
  const { client, schema, drop } = await testClient({ maxConnections: 2 });
  const token = "t0ken-" + crypto.randomUUID();
  for (const [args, env] of [[["--auth-token", token], {}], [[], { SERVICE_AUTH_TOKEN: token }]] as const) {
    const p = await startServe(schema, [...args], env);
    try {
      assert.match(p.startup, /; token required\)$/);
      const job = await client.enqueue("k");
      const call = async (path: string, headers: Record<string, string> = {}, method = "GET") => {
        const r = await fetch(`${p.url}${path}`, { method, headers });
        return { status: r.status, body: await r.json(), auth: r.headers.get("www-authenticate") };
      };
      const none = await call("/api/jobs");
      assert.equal(none.status, 401);
      assert.equal(none.body.code, "unauthorized");
      assert.match(none.auth ?? "", /^Bearer/);
      assert.equal((await call("/api/jobs", { authorization: `Bearer ${token}` })).status, 200);
      assert.equal((await call("/api/capabilities")).body.auth_required, true);
      const foreign = await call(`/api/jobs/${job.id}/cancel`, {
        authorization: `Bearer ${token}`,
        origin: "https://evil.example",
      }, "POST");
      assert.equal(foreign.status, 403);
      assert.equal(foreign.body.code, "cross_origin");
      assert.equal((await client.getJob(job.id))!.state, "available");
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
  }
  await drop();
});

Deno.test("svc serve refuses: unmigrated schema, unreachable database (exit 1); bad flags and a bad secret (exit 2)", async () => {
  const bad = await run(["serve", "--port", "0", "--callback-hmac-secret", "xyz"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^error: --callback-hmac-secret/);

  const unmigrated = await run([
    "serve",
    "--port",
    "0",
    "--schema",
    `svct_none_${crypto.randomUUID().slice(0, 8)}`,
  ]);
  assert.equal(unmigrated.code, 1);
  assert.match(unmigrated.stderr, /^error: .*svc migrate/);

  const unreachable = await run([
    "serve",
    "--port",
    "0",
    "--database-url",
    "postgres://postgres@127.0.0.1:1/postgres",
  ]);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /^error: cannot reach the database/);

  for (
    const [args, env] of [
      [["serve", "--port", "70000"], {}],
      [["serve", "--pool-max", "0"], {}],
      [["serve", "--cors-origin", "not a url"], {}],
      [["serve", "--cors-origin", "https://a.example/path"], {}],
      [["serve", "--port", "0"], { SERVICE_POOL_MAX: "many" }],
      [["serve", "--port", "0"], { SERVICE_READ_ONLY: "maybe" }],
      [["serve", "--auth-token", ""], {}],
      [["serve", "--auth-token", "with space"], {}],
      [["serve", "--port", "0"], { SERVICE_AUTH_TOKEN: "with space" }],
    ] as const
  ) {
    const r = await run([...args], env);
    assert.equal(r.code, 2, `${args.join(" ")} ${JSON.stringify(env)}: ${r.stderr}`);
  }
  const noDb = await run(["serve"], { DATABASE_URL: "" });
  assert.equal(noDb.code, 2);
  assert.match(noDb.stderr, /DATABASE_URL/);
});

/**
 * `svc callbacks serve` as a subprocess (`deno run -A cli.ts callbacks serve ...`): its refusals (exit 1,
 * one line naming the fix), and a running receiver that serves only the three POST routes, with one
 * log line per request that never carries the signature.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { DATABASE_URL, POOLED, testClient } from "../helpers/db.ts";
import { closedPort, pendingCallback, post } from "../helpers/http.ts";
import { svc } from "../helpers/cli.ts";
import { collectLines } from "../helpers/process.ts";
import { callbackUrl, parseSecret, sign, SIGNATURE_HEADER } from "../../mod.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const SECRET_HEX = "c0ffee".repeat(10) + "abcd";

/** Runs the CLI to completion with no secret and no database in the environment unless `env` gives them. */
function runCli(args: string[], env: Record<string, string> = {}) {
  return svc(args, { SERVICE_CALLBACK_HMAC_SECRET: "", DATABASE_URL: "", ...env });
}

/** Asserts a refusal: exit `code` (default 1) and exactly one `error: ...` line on stderr matching `re`. */
function assertRefusal(r: { code: number; stderr: string; stdout: string }, re: RegExp, code = 1): void {
  assert.equal(r.code, code, `exit code (stderr: ${r.stderr})`);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line: ${r.stderr}`);
  assert.match(lines[0], /^error: /);
  assert.match(lines[0], re);
  assert.equal(r.stdout, "", "nothing served, nothing printed");
}

function urlWithDb(db: string): string {
  const u = new URL(DATABASE_URL);
  u.pathname = `/${db}`;
  return u.toString();
}

Deno.test("callbacks serve refuses without a secret unless --allow-unsigned", async () => {
  const r = await runCli(["callbacks", "serve", "--database-url", `postgres://127.0.0.1:${closedPort()}/x`]);
  assertRefusal(
    r,
    /no callback secret: pass --callback-hmac-secret .* SERVICE_CALLBACK_HMAC_SECRET .*--allow-unsigned/,
  );
});

Deno.test("callbacks serve refuses a secret that is not 64 hex characters (flag or env), without echoing it", async () => {
  const bad = ["abc123", "g".repeat(64), SECRET_HEX + "00"];
  for (const secret of bad) {
    const viaFlag = await runCli(["callbacks", "serve", "--callback-hmac-secret", secret]);
    // A malformed value is a usage error (exit 2).
    assertRefusal(
      viaFlag,
      /--callback-hmac-secret \/ SERVICE_CALLBACK_HMAC_SECRET: .*64 hex characters.*openssl rand -hex 32/,
      2,
    );
    assert.ok(!viaFlag.stderr.includes(secret), "the secret is not printed");
    const viaEnv = await runCli(["callbacks", "serve"], { SERVICE_CALLBACK_HMAC_SECRET: secret });
    assertRefusal(viaEnv, /64 hex characters/, 2);
  }
});

Deno.test("callbacks serve refuses a read-only database and an unmigrated schema", async () => {
  const db = `svct_ro_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {}, prepare: !POOLED });
  try {
    await admin.unsafe(`create database ${db}`);
    await admin.unsafe(`alter database ${db} set default_transaction_read_only = on`);
    const r = await runCli(["--database-url", urlWithDb(db), "callbacks", "serve", "--allow-unsigned"]);
    assertRefusal(r, /database is read-only \(default_transaction_read_only is on\).*writable primary/);
    // --database-url after the command and the secret from the environment work the same way.
    const r2 = await runCli(["callbacks", "serve", "--database-url", urlWithDb(db)], {
      SERVICE_CALLBACK_HMAC_SECRET: SECRET_HEX,
    });
    assertRefusal(r2, /read-only/);
  } finally {
    await admin.unsafe(`drop database if exists ${db} with (force)`);
    await admin.end();
  }
  const missing = await runCli(
    ["callbacks", "serve", "--allow-unsigned", "--schema", "svct_never_migrated"],
    {
      DATABASE_URL,
    },
  );
  assertRefusal(missing, /svc migrate/);
});

Deno.test("callbacks serve: only the three POST routes, no UI, no admin API, no CORS; one log line per request", async () => {
  const { client, schema, drop } = await testClient();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "callbacks",
      "serve",
      "--port",
      "0",
      "--schema",
      schema,
      "--path-prefix",
      "hooks/",
    ],
    env: { SERVICE_CALLBACK_HMAC_SECRET: SECRET_HEX, DATABASE_URL, SERVICE_POOL_MAX: "2", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const reading = collectLines(child.stdout, lines);
  const stderr = new Response(child.stderr).text();
  try {
    const until = Date.now() + 30_000;
    let base = "";
    while (!base) {
      const m = lines.map((l) => /listening on (http:\/\/127\.0\.0\.1:\d+)\/hooks\//.exec(l)).find(Boolean);
      if (m) base = m[1];
      else if (Date.now() > until) throw new Error(`no listening line: ${lines.join("\n")} ${await stderr}`);
      else await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(lines[0], /\(signed\)$/);

    const { job, callbackId } = await pendingCallback(client);
    const sig = sign(parseSecret(SECRET_HEX), callbackId);

    for (
      const path of [
        "/",
        "/index.html",
        "/api/jobs",
        "/api/stats",
        "/api/callbacks/" + callbackId + "/complete",
      ]
    ) {
      const r = await post(base + path, undefined, {}, "GET");
      assert.equal(r.status, 404, `GET ${path}`);
      assert.equal(r.body.code, "not_found");
    }
    assert.equal((await post(`${base}/api/jobs`, { kind: "x" })).status, 404, "no admin API");
    for (const path of [`/hooks/${callbackId}/complete`, "/api/jobs", "/"]) {
      const pre = await fetch(base + path, {
        method: "OPTIONS",
        headers: { origin: "https://ui.example", "access-control-request-method": "POST" },
      });
      await pre.body?.cancel();
      assert.ok(pre.status === 405 || pre.status === 404, `OPTIONS ${path}: ${pre.status}`);
      for (const [h] of pre.headers) assert.ok(!h.startsWith("access-control-"), `no CORS header ${h}`);
    }

    const url = callbackUrl(base, "hooks/", callbackId);
    assert.equal((await post(url, { payload: 1 })).status, 401);
    const ok = await post(url, { payload: { via: "callbacks serve" } }, { [SIGNATURE_HEADER]: sig });
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, { job_id: job.id, callback_id: callbackId, state: "completed" });
    assert.deepEqual((await client.getJob(job.id))!.result, { via: "callbacks serve" });
    for (const [h] of ok.headers) assert.ok(!h.startsWith("access-control-"), `no CORS header ${h}`);

    child.kill("SIGTERM");
    const status = await child.status;
    await reading;
    assert.equal(status.code, 0, await stderr);
    const requests = lines.filter((l) => /^(GET|POST|OPTIONS) /.test(l));
    assert.equal(requests.length, 5 + 1 + 3 + 2, lines.join("\n"));
    for (const l of requests) assert.match(l, /^(GET|POST|OPTIONS) \/\S* \d{3} \d+(\.\d+)?ms$/);
    assert.ok(requests.some((l) => l.startsWith(`POST /hooks/${callbackId}/complete 200 `)));
    assert.ok(!lines.some((l) => l.includes(sig)), "the signature is never logged");
    assert.ok(!lines.some((l) => l.toLowerCase().includes(SECRET_HEX)), "nor the secret");
    assert.match(lines.at(-1)!, /stopped/);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
    await reading.catch(() => {});
    await stderr.catch(() => {});
    await drop();
  }
});

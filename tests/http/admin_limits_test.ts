/**
 * Admin reads and changes are bounded (docs/reference/rest.md, "Busy"): `svc serve` answers 503 `busy`
 * when a statement outlives `--statement-timeout` or when its pool has no room within 2 s, and cancels
 * the statement of a request whose client went away; the CLI gives up after `--statement-timeout`.
 * A slow statement is made by holding a lock on the runtimes table (read by `GET /api/runtimes` and
 * `svc health` on both engines) from a connection of the test's own.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { DATABASE_URL, testClient, waitFor } from "../helpers/db.ts";
import { startServe } from "../helpers/serve.ts";
import { svc } from "../helpers/cli.ts";

/** Holds an ACCESS EXCLUSIVE lock on the schema's runtimes table until the returned function is called. */
async function lockRuntimes(schema: string): Promise<() => Promise<void>> {
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const tx = sql.begin(async (tx) => {
    await tx.unsafe(`lock table "${schema}".runtimes in access exclusive mode`);
    locked();
    await released;
  });
  await isLocked;
  let ended: Promise<void> | null = null;
  return () =>
    ended ??= (async () => {
      release();
      await tx;
      await sql.end();
    })();
}

/** Releases the lock; then the server answers again. */
async function unlockAndExpectOk(unlock: () => Promise<void>, url: string): Promise<void> {
  await unlock();
  const ok = await fetch(`${url}/api/runtimes`);
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
}

/** Statements of `application_name` svc waiting on a lock right now (the serve pool's). */
async function waitingStatements(sql: postgres.Sql, schema: string): Promise<number> {
  const [r] = await sql.unsafe(
    `select count(*)::int as n from pg_stat_activity
      where application_name = 'svc' and state = 'active' and wait_event_type = 'Lock'
        and query like '%' || $1 || '%'`,
    [`"${schema}".runtimes`],
  );
  return r.n;
}

Deno.test("svc serve: a statement past --statement-timeout answers 503 busy; the server goes on", async () => {
  const { schema, drop } = await testClient();
  const serve = await startServe(schema, ["--statement-timeout", "1", "--pool-max", "3"]);
  let unlock: (() => Promise<void>) | undefined;
  try {
    unlock = await lockRuntimes(schema);
    const t0 = performance.now();
    const r = await fetch(`${serve.url}/api/runtimes`);
    const body = await r.json();
    const ms = performance.now() - t0;
    assert.equal(r.status, 503);
    assert.equal(body.code, "busy");
    assert.match(body.error, /statement timeout of 1 s.*--statement-timeout/);
    assert.ok(ms >= 900 && ms < 10_000, `answered after ${Math.round(ms)} ms`);
    await unlockAndExpectOk(unlock, serve.url);
  } finally {
    await unlock?.();
    await serve.stop();
    await drop();
  }
});

Deno.test("svc serve: a request whose client goes away has its statement cancelled; a full pool answers 503 busy at once", async () => {
  const { schema, drop } = await testClient();
  // pool of 3: admin requests get 2 of its connections (one stays free for the callback receiver).
  const serve = await startServe(schema, ["--statement-timeout", "600", "--pool-max", "3"]);
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  let unlock: (() => Promise<void>) | undefined;
  try {
    unlock = await lockRuntimes(schema);
    // Two requests take the admin share of the pool and wait on the lock.
    const gone = [new AbortController(), new AbortController()];
    const pending = gone.map((ac) =>
      fetch(`${serve.url}/api/runtimes`, { signal: ac.signal }).catch((e) => e)
    );
    await waitFor(async () => (await waitingStatements(sql, schema)) === 2, 10_000, "two waiting statements");
    // A third finds no room: 503 busy after the 2 s wait, with Retry-After, instead of queueing.
    const t0 = performance.now();
    const busy = await fetch(`${serve.url}/api/runtimes`);
    const body = await busy.json();
    assert.equal(busy.status, 503);
    assert.equal(body.code, "busy");
    assert.match(body.error, /pool is busy/);
    assert.equal(busy.headers.get("retry-after"), "2");
    assert.ok(performance.now() - t0 < 8_000);
    // The clients of the two go away: their statements are cancelled although the lock is still held.
    gone.forEach((ac) => ac.abort());
    await Promise.all(pending);
    await waitFor(async () => (await waitingStatements(sql, schema)) === 0, 10_000, "the statements to end");
    // The pool is free again: answers come once the lock is released.
    await unlockAndExpectOk(unlock, serve.url);
  } finally {
    await unlock?.();
    await sql.end();
    await serve.stop();
    await drop();
  }
});

Deno.test("CLI: an admin command past --statement-timeout exits 1 naming the option", async () => {
  const { schema, drop } = await testClient();
  let unlock: (() => Promise<void>) | undefined;
  try {
    unlock = await lockRuntimes(schema);
    const t0 = performance.now();
    const r = await svc(["health", "--schema", schema, "--statement-timeout", "1"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /statement timeout of 1 s.*--statement-timeout/);
    assert.ok(performance.now() - t0 < 15_000);
  } finally {
    await unlock?.();
    await drop();
  }
});

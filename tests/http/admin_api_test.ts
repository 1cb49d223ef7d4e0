/**
 * The admin REST API of `svc serve`, route by route: success and error answers, in-process over a
 * fresh schema (the shapes are those of docs/reference/rest.md, which the UI relies on).
 */
import assert from "node:assert/strict";
import { JOB_STATES } from "../../src/types.ts";
import { adminFixture, backdateFinished, setState, withApi } from "../helpers/admin.ts";
import { TEST_ENGINE } from "../helpers/db.ts";
import { pendingCallback } from "../helpers/http.ts";

const JOB_KEYS = [
  "id",
  "kind",
  "queue",
  "args",
  "state",
  "priority",
  "attempt",
  "max_attempts",
  "effective_max_attempts",
  "run_at",
  "created_at",
  "attempted_at",
  "finalized_at",
  "heartbeat_at",
  "deadline_at",
  "errors",
  "tags",
  "metadata",
  "result",
  "unique_key",
  "limit_key",
  "callback_id",
  "callback_timeout_at",
  "attempted_by",
  "lease",
];

function assertError(a: { status: number; body: any }, status: number, code: string): void {
  assert.equal(a.status, status, JSON.stringify(a.body));
  assert.equal(a.body.code, code);
  assert.equal(typeof a.body.error, "string");
  assert.ok(a.body.error.length > 0);
  assert.deepEqual(Object.keys(a.body).sort(), ["code", "error"]);
}

Deno.test("GET /api/capabilities: read_only false, the version and the storage engine", () =>
  withApi(async ({ call }) => {
    const a = await call("GET", "/api/capabilities");
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, {
      read_only: false,
      version: a.body.version,
      storage: TEST_ENGINE,
      auth_required: false,
      authenticated: true,
      default_queue: "default",
    });
    assert.match(a.body.version, /^\d+\.\d+\.\d+/);
    assert.match(a.headers.get("content-type")!, /^application\/json/);
  }));

Deno.test("GET /api/capabilities: default_queue is the server's defaultQueue (svc dev passes its dev queue)", () =>
  withApi(async ({ call }) => {
    assert.equal((await call("GET", "/api/capabilities")).body.default_queue, "dev");
  }, { defaultQueue: "dev" }));

Deno.test("GET /api/stats: counts of all 8 states, per queue, and 60 minutes of throughput", () =>
  withApi(async ({ client, call }) => {
    const empty = await call("GET", "/api/stats");
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.counts, Object.fromEntries(JOB_STATES.map((s) => [s, 0])));
    assert.deepEqual(empty.body.queues, []);

    const jobs = await client.enqueueMany([
      ...Array.from({ length: 3 }, () => ({ kind: "a", queue: "q1" })),
      ...Array.from({ length: 2 }, () => ({ kind: "b", queue: "q2" })),
      { kind: "c", queue: "q2", runAt: new Date(Date.now() + 3_600_000) },
    ]);
    await setState(client, [jobs[0].id, jobs[1].id], "completed");
    await setState(client, [jobs[3].id], "failed");
    // A job finalized two hours ago is outside the window.
    await setState(client, [jobs[4].id], "completed");
    await backdateFinished(client, jobs[4].id, "2 hours");

    const a = await call("GET", "/api/stats");
    assert.equal(a.status, 200);
    assert.deepEqual(a.body.counts, {
      scheduled: 1,
      available: 1,
      running: 0,
      waiting_external: 0,
      retryable: 0,
      completed: 3,
      failed: 1,
      cancelled: 0,
    });
    assert.deepEqual(a.body.queues.map((q: any) => [q.name, q.counts.completed, q.counts.failed, q.paused]), [
      ["q1", 2, 0, false],
      ["q2", 1, 1, false],
    ]);
    const t = a.body.throughput as { minute: string; completed: number; failed: number }[];
    assert.equal(t.length, 60);
    for (let i = 1; i < t.length; i++) {
      assert.equal(Date.parse(t[i].minute) - Date.parse(t[i - 1].minute), 60_000);
    }
    assert.ok(
      Date.parse(t[59].minute) <= Date.now() && Date.now() - Date.parse(t[59].minute) < 60_000 + 5_000,
    );
    assert.equal(t.reduce((s, p) => s + p.completed, 0), 2);
    assert.equal(t.reduce((s, p) => s + p.failed, 0), 1);
    assert.ok(t.slice(-2).some((p) => p.completed === 2 && p.failed === 1));
  }));

Deno.test("GET /api/queues, POST pause and resume; invalid queue names are 400", () =>
  withApi(async ({ client, call }) => {
    await client.enqueue("a", {}, { queue: "mail" });
    const list = await call("GET", "/api/queues");
    assert.equal(list.status, 200);
    assert.equal(list.body.queues.length, 1);
    const q = list.body.queues[0];
    assert.deepEqual(Object.keys(q).sort(), [
      "approximate",
      "counts",
      "limit",
      "live_runtimes",
      "name",
      "oldest_available_age_seconds",
      "paused",
      "unhandled_kinds",
    ]);
    assert.equal(q.limit, null, "no limits row");
    assert.deepEqual(q.approximate, []);
    assert.equal(q.counts.available, 1);
    assert.equal(typeof q.oldest_available_age_seconds, "number");

    const p = await call("POST", "/api/queues/mail/pause");
    assert.equal(p.status, 200);
    assert.equal(p.body.queue.name, "mail");
    assert.equal(p.body.queue.paused, true);
    assert.equal((await call("GET", "/api/queues")).body.queues[0].paused, true);
    const r = await call("POST", "/api/queues/mail/resume");
    assert.equal(r.status, 200);
    assert.equal(r.body.queue.paused, false);

    // A queue without jobs is unknown (404), unless paused ahead of its first job with create.
    assertError(await call("POST", "/api/queues/later/pause"), 404, "not_found");
    const ahead = await call("POST", "/api/queues/later/pause?create=true");
    assert.equal(ahead.status, 200);
    assert.deepEqual(ahead.body.queue.counts, Object.fromEntries(JOB_STATES.map((s) => [s, 0])));

    assertError(await call("POST", "/api/queues/bad%20name/pause"), 400, "invalid_request");
    assertError(await call("POST", `/api/queues/${"x".repeat(49)}/resume`), 400, "invalid_request");
  }));

Deno.test("PUT, GET and DELETE /api/queues/:name/limit: a rate set, shown with its use, refused values 400", () =>
  withApi(async ({ client, call }) => {
    await client.enqueue("a", {}, { queue: "mail" });
    assert.deepEqual((await call("GET", "/api/queues/mail/limit")).body, { limit: null });
    const set = await call("PUT", "/api/queues/mail/limit", { rate: 20, per_ms: 1000 });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.limit.rate, 20);
    assert.equal(set.body.limit.per_ms, 1000);
    assert.equal(set.body.limit.set_by, "api");
    assert.equal(set.body.limit.concurrency, null);
    assert.deepEqual(set.body.limit.in_use, { rate: 0, concurrency: null, per_key: null });
    assert.ok(Date.parse(set.body.limit.rate_in_force_at) > Date.now() - 10_000);
    const [q] = (await call("GET", "/api/queues")).body.queues;
    assert.equal(q.limit.rate, 20, "the queue list carries the limit");
    assert.equal((await call("GET", "/api/queues/mail/limit")).body.limit.rate, 20);

    for (
      const bad of [
        { rate: 20 },
        { rate: 0, per_ms: 1000 },
        { rate: 5, per_ms: 86_400_001 },
        { rate: 1.5, per_ms: 10 },
        { burst: 1 },
        { concurrency: 0 },
        { per_key: 0 },
        { count_parked: "yes" },
      ]
    ) {
      assertError(await call("PUT", "/api/queues/mail/limit", bad), 400, "invalid_request");
    }
    assertError(
      await call("PUT", "/api/queues/bad%20name/limit", { rate: 1, per_ms: 1 }),
      400,
      "invalid_request",
    );
    assert.equal(
      (await call("GET", "/api/queues/mail/limit")).body.limit.rate,
      20,
      "a refused change changes nothing",
    );

    // A per-key limit needs queue storage (400 on canonical); its use is the units each key holds.
    const perKey = await call("PUT", "/api/queues/mail/limit", { per_key: 2 });
    if (TEST_ENGINE === "queue_storage") {
      assert.equal(perKey.status, 200, JSON.stringify(perKey.body));
      assert.equal(perKey.body.limit.per_key, 2);
      assert.deepEqual(perKey.body.limit.in_use.per_key, {});
    } else {
      assertError(perKey, 400, "invalid_request");
    }

    const cleared = await call("PUT", "/api/queues/mail/limit", {});
    assert.equal(cleared.body.limit.rate, null);
    assert.deepEqual((await call("DELETE", "/api/queues/mail/limit")).body, { reset: true });
    assert.deepEqual((await call("DELETE", "/api/queues/mail/limit")).body, { reset: false });
    assert.deepEqual((await call("GET", "/api/queues/mail/limit")).body, { limit: null });
  }));

Deno.test("GET /api/jobs: filters, text search, newest first, keyset pagination", () =>
  withApi(async ({ client, call }) => {
    const jobs = await client.enqueueMany([
      { kind: "email", queue: "mail", args: { to: "Alice@example.com" }, tags: ["vip"] },
      { kind: "email", queue: "mail", args: { to: "bob@example.com" } },
      { kind: "resize", queue: "media", args: { path: "/img/100%_cat.png" } },
      ...Array.from({ length: 7 }, (_, i) => ({ kind: "noop", args: { i } })),
    ]);
    await setState(client, [jobs[1].id], "failed");

    const all = await call("GET", "/api/jobs");
    assert.equal(all.status, 200);
    assert.equal(all.body.jobs.length, 10);
    assert.equal(all.body.next_cursor, null);
    assert.deepEqual(all.body.jobs.map((j: any) => j.id), jobs.map((j) => j.id).reverse());
    for (const k of JOB_KEYS) assert.ok(k in all.body.jobs[0], `job has ${k}`);

    const ids = async (qs: string) => (await call("GET", `/api/jobs?${qs}`)).body.jobs.map((j: any) => j.id);
    assert.deepEqual(await ids("state=failed"), [jobs[1].id]);
    assert.deepEqual(await ids("kind=email"), [jobs[1].id, jobs[0].id]);
    assert.deepEqual(await ids("queue=media"), [jobs[2].id]);
    assert.deepEqual(await ids("tag=vip"), [jobs[0].id]);
    assert.deepEqual(await ids("q=alice"), [jobs[0].id], "search is case-insensitive");
    assert.deepEqual(await ids("q=100%25_"), [jobs[2].id], "% and _ are literal");
    assert.deepEqual(await ids("kind=email&state=available"), [jobs[0].id]);
    assert.deepEqual(await ids("q=nothing-like-this"), []);

    // Pages of 3 cover every job once, in order.
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: any = await call(
        "GET",
        `/api/jobs?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      assert.equal(page.status, 200);
      assert.ok(page.body.jobs.length <= 3);
      seen.push(...page.body.jobs.map((j: any) => j.id));
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 4);
    assert.deepEqual(seen, jobs.map((j) => j.id).reverse());

    // The default page is 50 jobs.
    await client.enqueueMany(Array.from({ length: 45 }, () => ({ kind: "more" })));
    const def = await call("GET", "/api/jobs");
    assert.equal(def.body.jobs.length, 50);
    assert.equal(typeof def.body.next_cursor, "string");
  }));

Deno.test("GET /api/jobs: a bad state, limit or cursor is 400 invalid_request", () =>
  withApi(async ({ call }) => {
    for (
      const qs of [
        "state=done",
        "state=FAILED",
        "limit=0",
        "limit=1001",
        "limit=ten",
        "limit=1.5",
        "cursor=not-a-cursor",
        `cursor=${btoa("id:abc")}`,
        "queue=bad%20queue",
      ]
    ) {
      const a = await call("GET", `/api/jobs?${qs}`);
      assertError(a, 400, "invalid_request");
    }
    const msg = (await call("GET", "/api/jobs?state=done")).body.error;
    assert.match(msg, /state must be one of scheduled, available/);
    assert.equal((await call("GET", "/api/jobs?limit=1000")).status, 200);
  }));

Deno.test("POST /api/jobs: 201 with the job; defaults, run_at, unique jobs and 409 unique_conflict", () =>
  withApi(async ({ call }) => {
    const a = await call("POST", "/api/jobs", { kind: "email", args: { to: "a@example.com" } });
    assert.equal(a.status, 201);
    assert.deepEqual(
      [a.body.job.kind, a.body.job.queue, a.body.job.state, a.body.job.priority, a.body.job.max_attempts],
      ["email", "default", "available", 2, 25],
    );
    assert.deepEqual(a.body.job.args, { to: "a@example.com" });

    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const b = await call("POST", "/api/jobs", {
      kind: "report",
      queue: "reports",
      priority: 1,
      max_attempts: 3,
      run_at: runAt,
      tags: ["t"],
      metadata: { by: "test" },
    });
    assert.equal(b.status, 201);
    assert.equal(b.body.job.state, "scheduled");
    assert.equal(b.body.job.run_at, runAt);
    assert.deepEqual([b.body.job.priority, b.body.job.max_attempts, b.body.job.tags], [1, 3, ["t"]]);
    assert.deepEqual((await call("GET", `/api/jobs/${b.body.job.id}`)).body.job.metadata, { by: "test" });

    const first = await call("POST", "/api/jobs", { kind: "u", args: { k: 1 }, unique: {} });
    const dup = await call("POST", "/api/jobs", { kind: "u", args: { k: 1 }, unique: {} });
    assert.equal(dup.status, 201);
    assert.equal(dup.body.job.id, first.body.job.id);
    assert.equal(dup.body.job.duplicate, true);
    const conflict = await call("POST", "/api/jobs", {
      kind: "u",
      args: { k: 1 },
      unique: { on_conflict: "error" },
    });
    assertError(conflict, 409, "unique_conflict");
    assert.match(conflict.body.error, new RegExp(`job ${first.body.job.id}`));
  }));

Deno.test("POST /api/jobs: invalid bodies are 400 invalid_request naming the field", () =>
  withApi(async ({ call }) => {
    const cases: [unknown, RegExp][] = [
      [{}, /body\.kind is required/],
      [{ kind: "" }, /body\.kind/],
      [{ kind: 5 }, /body\.kind must be a string/],
      [{ kind: "k", args: [1] }, /body\.args must be an object/],
      [{ kind: "k", args: "x" }, /body\.args/],
      [{ kind: "k", priority: 5 }, /body\.priority must be.*1 to 4/],
      [{ kind: "k", priority: "1" }, /body\.priority must be an integer/],
      [{ kind: "k", max_attempts: 0 }, /body\.max_attempts/],
      [{ kind: "k", queue: "no spaces" }, /body\.queue/],
      [{ kind: "k", run_at: "tomorrow" }, /body\.run_at must be an RFC 3339 time/],
      [{ kind: "k", run_at: "2026-12-01T09:00:00" }, /body\.run_at/],
      [{ kind: "k", tags: [1] }, /body\.tags\[0\]/],
      [{ kind: "k", maxAttempts: 3 }, /body\.maxAttempts is not a known field/],
      [{ kind: "k", unique: { on_conflict: "explode" } }, /body\.unique\.on_conflict/],
      [[{ kind: "k" }], /must be a JSON object/],
      ["{not json", /not JSON/],
      ["null", /must be a JSON object/],
    ];
    for (const [body, re] of cases) {
      const a = await call("POST", "/api/jobs", body);
      assertError(a, 400, "invalid_request");
      assert.match(a.body.error, re, JSON.stringify(body));
    }
    // Nothing was written.
    assert.equal((await call("GET", "/api/jobs")).body.jobs.length, 0);
  }));

Deno.test("GET /api/jobs/:id: the job with its errors and callbacks; 404 and 400", () =>
  withApi(async ({ client, call }) => {
    const { job, callbackId } = await pendingCallback(client);
    await client.completeExternal(callbackId, { ok: true });
    const a = await call("GET", `/api/jobs/${job.id}`);
    assert.equal(a.status, 200);
    assert.equal(a.body.job.id, job.id);
    assert.equal(a.body.job.state, "completed");
    assert.deepEqual(a.body.job.result, { ok: true });
    assert.equal(a.body.job.callback_id, callbackId);
    assert.equal(a.body.callbacks.length, 1);
    const cb = a.body.callbacks[0];
    assert.equal(cb.id, callbackId);
    assert.equal(cb.attempt, 1);
    assert.equal(cb.state, "completed");
    for (const k of ["deadline_at", "created_at", "resolved_at"]) {
      assert.ok(!Number.isNaN(Date.parse(cb[k])), k);
    }

    const failed = await client.enqueue("f");
    const errors = [
      { attempt: 1, at: new Date().toISOString(), error: "boom 1", terminal: false },
      { attempt: 2, at: new Date().toISOString(), error: "boom 2", terminal: true },
    ];
    await setState(client, [failed.id], "failed", errors);
    const f = await call("GET", `/api/jobs/${failed.id}`);
    assert.deepEqual(
      f.body.job.errors.map(({ at: _, ...e }: { at: string }) => e),
      errors.map(({ at: _, ...e }) => e),
    );
    for (const e of f.body.job.errors) assert.match(e.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(f.body.callbacks, []);

    assertError(await call("GET", "/api/jobs/999999"), 404, "not_found");
    assertError(await call("GET", "/api/jobs/abc"), 400, "invalid_request");
    assertError(await call("GET", "/api/jobs/0"), 400, "invalid_request");
    assertError(await call("GET", "/api/jobs/99999999999999999999"), 400, "invalid_request");
  }));

Deno.test("POST /api/jobs/:id/retry and /cancel: the job; 409 invalid_state, 404, 400", () =>
  withApi(async ({ client, call }) => {
    const job = await client.enqueue("k");
    assertError(await call("POST", `/api/jobs/${job.id}/retry`), 409, "invalid_state");

    const c = await call("POST", `/api/jobs/${job.id}/cancel`);
    assert.equal(c.status, 200);
    assert.equal(c.body.job.state, "cancelled");
    assertError(await call("POST", `/api/jobs/${job.id}/cancel`), 409, "invalid_state");

    const r = await call("POST", `/api/jobs/${job.id}/retry`);
    assert.equal(r.status, 200);
    assert.equal(r.body.job.state, "available");
    assert.equal(r.body.job.attempt, 0);

    await setState(client, [job.id], "failed", [{ attempt: 1, at: new Date().toISOString(), error: "x" }]);
    const again = await call("POST", `/api/jobs/${job.id}/retry`);
    assert.equal(again.body.job.state, "available");
    assert.equal(again.body.job.errors.length, 1, "errors are kept");

    for (const action of ["retry", "cancel"]) {
      assertError(await call("POST", `/api/jobs/424242/${action}`), 404, "not_found");
      assertError(await call("POST", `/api/jobs/x/${action}`), 400, "invalid_request");
      assertError(await call("GET", `/api/jobs/${job.id}/${action}`), 405, "method_not_allowed");
    }
  }));

Deno.test("POST /api/jobs/bulk-retry and bulk-cancel: counts by filter; bad filters are 400", () =>
  withApi(async ({ client, call }) => {
    const jobs = await client.enqueueMany([
      { kind: "a", queue: "q1" },
      { kind: "a", queue: "q1" },
      { kind: "a", queue: "q2" },
      { kind: "b", queue: "q1" },
      { kind: "b", queue: "q1" },
    ]);
    await setState(client, jobs.slice(0, 4).map((j) => j.id), "failed");

    const r1 = await call("POST", "/api/jobs/bulk-retry", { state: "failed", kind: "a", queue: "q1" });
    assert.equal(r1.status, 200);
    assert.deepEqual(r1.body, { count: 2 });
    const r2 = await call("POST", "/api/jobs/bulk-retry", { state: "failed" });
    assert.deepEqual(r2.body, { count: 2 });
    assert.deepEqual((await call("POST", "/api/jobs/bulk-retry", { state: "failed" })).body, { count: 0 });

    const c1 = await call("POST", "/api/jobs/bulk-cancel", { kind: "b" });
    assert.deepEqual(c1.body, { count: 2 });
    const c2 = await call("POST", "/api/jobs/bulk-cancel", {});
    assert.deepEqual(c2.body, { count: 3 });
    const states = (await call("GET", "/api/jobs")).body.jobs.map((j: any) => j.state);
    assert.deepEqual(states, Array(5).fill("cancelled"));

    assertError(await call("POST", "/api/jobs/bulk-retry", { state: "running" }), 400, "invalid_request");
    assertError(await call("POST", "/api/jobs/bulk-cancel", { state: "completed" }), 400, "invalid_request");
    assertError(await call("POST", "/api/jobs/bulk-cancel", { state: "nope" }), 400, "invalid_request");
    assertError(await call("POST", "/api/jobs/bulk-retry", { kinds: "a" }), 400, "invalid_request");
    assertError(await call("POST", "/api/jobs/bulk-retry", "[]"), 400, "invalid_request");
    assertError(await call("GET", "/api/jobs/bulk-retry"), 400, "invalid_request");
  }));

Deno.test("GET /api/kinds: every kind with counts by state", () =>
  withApi(async ({ client, call }) => {
    assert.deepEqual((await call("GET", "/api/kinds")).body, { kinds: [], approximate: false });
    const jobs = await client.enqueueMany([{ kind: "b" }, { kind: "a" }, { kind: "a" }]);
    await setState(client, [jobs[1].id], "completed");
    const a = await call("GET", "/api/kinds");
    assert.equal(a.status, 200);
    const zero = Object.fromEntries(JOB_STATES.map((s) => [s, 0]));
    // No samples yet: the last hour's figures are empty.
    const hour = {
      completed_1h: 0,
      failed_1h: 0,
      retried_1h: 0,
      failure_rate: null,
      run_p50_ms: null,
      run_p95_ms: null,
    };
    assert.deepEqual(a.body.kinds, [
      { kind: "a", counts: { ...zero, available: 1, completed: 1 }, ...hour },
      { kind: "b", counts: { ...zero, available: 1 }, ...hour },
    ]);
  }));

Deno.test("GET /api/cron and POST trigger, pause, resume; unknown schedules are 404", () =>
  withApi(async ({ client, call }) => {
    assert.deepEqual((await call("GET", "/api/cron")).body, { cron: [] });
    await client.addCron("nightly", {
      schedule: "0 3 * * *",
      kind: "report",
      args: { full: true },
      queue: "reports",
      timezone: "Europe/Paris",
    });
    const list = await call("GET", "/api/cron");
    assert.equal(list.status, 200);
    assert.equal(list.body.cron.length, 1);
    const c = list.body.cron[0];
    for (
      const k of [
        "name",
        "schedule",
        "kind",
        "args",
        "queue",
        "timezone",
        "paused",
        "last_fire_at",
        "next_fire_at",
      ]
    ) {
      assert.ok(k in c, k);
    }
    assert.deepEqual([c.name, c.schedule, c.kind, c.queue, c.timezone, c.paused], [
      "nightly",
      "0 3 * * *",
      "report",
      "reports",
      "Europe/Paris",
      false,
    ]);
    assert.ok(Date.parse(c.next_fire_at) > Date.now());

    const t = await call("POST", "/api/cron/nightly/trigger");
    assert.equal(t.status, 200);
    assert.deepEqual([t.body.job.kind, t.body.job.queue, t.body.job.args], ["report", "reports", {
      full: true,
    }]);

    const p = await call("POST", "/api/cron/nightly/pause");
    assert.equal(p.status, 200);
    assert.equal(p.body.cron.paused, true);
    assert.equal(p.body.cron.next_fire_at, null);
    const r = await call("POST", "/api/cron/nightly/resume");
    assert.equal(r.body.cron.paused, false);

    for (const action of ["trigger", "pause", "resume"]) {
      assertError(await call("POST", `/api/cron/missing/${action}`), 404, "not_found");
      assertError(await call("POST", `/api/cron/bad%20name/${action}`), 400, "invalid_request");
    }
  }));

Deno.test("GET /api/runtimes: live processes, their queues, readiness and the leader", () =>
  withApi(async ({ client, call }) => {
    assert.deepEqual((await call("GET", "/api/runtimes")).body, { runtimes: [] });
    await client.engine.upsertRuntime({
      id: "host:1:a",
      hostname: "host",
      pid: 1,
      queues: ["default", "mail"],
      ready: true,
      leader: true,
      health: {},
    });
    await client.engine.upsertRuntime({
      id: "host:2:b",
      hostname: "host",
      pid: 2,
      queues: ["default"],
      ready: false,
      leader: false,
      health: {},
    });
    await client.sql.unsafe(
      `update ${client.names.q}.runtimes set heartbeat_at = now() - interval '1 hour' where id = 'host:2:b'`,
    );
    // The leader shown is the holder of the current term (its own column may be stale).
    await client.sql.unsafe(
      `update ${client.names.q}.leadership set holder = 'host:1:a', term = term + 1, renewed_at = now()`,
    );
    const a = await call("GET", "/api/runtimes");
    assert.equal(a.status, 200);
    const [r1, r2] = a.body.runtimes;
    assert.deepEqual(Object.keys(r1).sort(), [
      "engines",
      "heartbeat_at",
      "held",
      "held_jobs",
      "hostname",
      "id",
      "in_flight",
      "kinds",
      "leader",
      "live",
      "pid",
      "queues",
      "ready",
      "rescue_after_ms",
      "started_at",
      "stuck_handlers",
      "throttled",
    ]);
    assert.deepEqual([r1.id, r1.pid, r1.queues, r1.ready, r1.leader, r1.live], [
      "host:1:a",
      1,
      ["default", "mail"],
      true,
      true,
      true,
    ]);
    assert.deepEqual([r2.id, r2.ready, r2.leader, r2.live], ["host:2:b", false, false, false]);
  }));

Deno.test("GET /api/storage: the transition status (D-15 shape)", () =>
  withApi(async ({ call, schema }) => {
    const a = await call("GET", "/api/storage");
    assert.equal(a.status, 200);
    const canonical = TEST_ENGINE === "canonical";
    const state = canonical ? "canonical" : "active";
    assert.deepEqual(a.body, {
      state,
      transition: state,
      engine: TEST_ENGINE,
      prepared_engine: null,
      canonical_backlog: 0,
      queue_storage_ready: true,
      queue_storage_schema: `${schema}_qs`,
      runtimes: { canonical_only: 0, queue_storage_capable: 0 },
      blockers: [],
      abort_possible: canonical,
      next_step: canonical ? "svc storage prepare" : null,
    });
  }));

Deno.test("unknown /api paths are 404 not_found, wrong methods 405 with Allow, never index.html", () =>
  withApi(async ({ call }) => {
    for (const path of ["/api", "/api/", "/api/nope", "/api/jobs/1/explode", "/api/queues/q"]) {
      const a = await call("GET", path);
      assertError(a, 404, "not_found");
    }
    const m = await call("PUT", "/api/jobs/1");
    assertError(m, 405, "method_not_allowed");
    assert.equal(m.headers.get("allow"), "GET, DELETE, OPTIONS");
    const p = await call("PUT", "/api/queues/q/pause");
    assertError(p, 405, "method_not_allowed");
    assert.equal(p.headers.get("allow"), "POST, OPTIONS");
    assertError(await call("POST", "/api/stats"), 405, "method_not_allowed");
    assertError(await call("GET", "/api/queues/q/pause"), 405, "method_not_allowed");
  }));

Deno.test("a database fault is 500 internal without details; the details go to the log", async () => {
  const log = { info: [] as string[], error: [] as string[] };
  const f = await adminFixture({ log });
  try {
    await f.client.sql.unsafe(`drop table ${f.client.names.q}.jobs cascade`);
    const a = await f.call("GET", "/api/jobs");
    assertError(a, 500, "internal");
    assert.doesNotMatch(a.body.error, /jobs|relation|does not exist/);
    assert.equal(log.error.length, 1);
    assert.match(log.error[0], /GET \/api\/jobs.*does not exist/s);
  } finally {
    await f.drop();
  }
});

Deno.test("mutations are logged one line each (method, path, status, ms); reads are not", async () => {
  const log = { info: [] as string[], error: [] as string[] };
  const f = await adminFixture({ log });
  try {
    await f.call("GET", "/api/jobs");
    await f.call("POST", "/api/jobs", { kind: "k" });
    await f.call("POST", "/api/jobs/99/cancel");
    assert.equal(log.info.length, 2);
    assert.match(log.info[0], /^POST \/api\/jobs 201 \d+ms$/);
    assert.match(log.info[1], /^POST \/api\/jobs\/99\/cancel 404 \d+ms$/);
  } finally {
    await f.drop();
  }
});

Deno.test("a trailing slash on a REST route is ignored (routes, 405s and the callback receiver alike)", () =>
  withApi(async ({ client, call }) => {
    const created = await call("POST", "/api/jobs/", { kind: "slash" });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const list = await call("GET", "/api/jobs/?kind=slash");
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.equal(list.body.jobs.length, 1);
    const one = await call("GET", `/api/jobs/${created.body.job.id}/`);
    assert.equal(one.status, 200);
    assert.equal(one.body.job.id, created.body.job.id);
    assert.equal((await call("GET", "/api/capabilities/")).status, 200);
    assert.equal(
      (await call("POST", `/api/jobs/${created.body.job.id}/cancel/`)).body.job.state,
      "cancelled",
    );
    assertError(await call("DELETE", "/api/jobs/"), 405, "method_not_allowed");
    assertError(await call("GET", "/api/nope/"), 404, "not_found");
    assertError(await call("GET", "/api/jobs//"), 404, "not_found");
    const { callbackId } = await pendingCallback(client);
    const cb = await call("POST", `/api/callbacks/${callbackId}/complete/`, { payload: 1 });
    assert.equal(cb.status, 200, JSON.stringify(cb.body));
    assert.equal(cb.body.state, "completed");
  }));

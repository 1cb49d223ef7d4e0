/**
 * Admin REST routes of the operators' UI (issue 19): running jobs, the rescue window of runtimes, bulk
 * dry runs. Run on both engines (SVC_TEST_ENGINE=canonical|queue_storage).
 */
import assert from "node:assert/strict";
import { claimById, setState, withApi } from "../helpers/admin.ts";

function assertInvalid(a: { status: number; body: any }): void {
  assert.equal(a.status, 400, JSON.stringify(a.body));
  assert.equal(a.body.code, "invalid_request");
  assert.equal(typeof a.body.error, "string");
}

Deno.test("GET /api/running: running and held jobs, the longest claimed first, bounded", () =>
  withApi(async ({ call, client }) => {
    const [a, b, c] = await client.enqueueMany([
      { kind: "k", queue: "run", args: { n: 1 } },
      { kind: "k", queue: "run", args: { n: 2 } },
      { kind: "k", queue: "run", args: { n: 3 } },
    ]);
    await claimById(client, a.id);
    await claimById(client, b.id, {}); // held (prefetched) or started: both are running (the attempt counted at claim)
    await client.engine.upsertRuntime({
      id: "test-runtime",
      hostname: "h",
      pid: 1,
      queues: ["run"],
      ready: true,
      leader: false,
      health: { in_flight: 1, rescue_after_ms: 60_000 },
    });

    const all = await call("GET", "/api/running");
    assert.equal(all.status, 200);
    assert.equal(all.body.truncated, false);
    assert.deepEqual(all.body.jobs.map((j: any) => j.id), [a.id, b.id]);
    assert.equal(all.body.jobs[0].state, "running");
    assert.ok(all.body.jobs[0].attempted_at <= all.body.jobs[1].attempted_at, "the longest claimed first");
    assert.equal(all.body.jobs[1].state, "running");
    assert.equal(all.body.jobs[1].attempted_by, "test-runtime");
    assert.ok(!all.body.jobs.some((j: any) => j.id === c.id), "an available job is not running");

    const one = await call("GET", "/api/running?limit=1");
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.jobs.map((j: any) => j.id), [a.id]);
    assert.equal(one.body.truncated, true);

    const rt = await call("GET", "/api/runtimes");
    const mine = rt.body.runtimes.find((r: any) => r.id === "test-runtime");
    assert.equal(mine.rescue_after_ms, 60_000);
    assert.equal(mine.in_flight, 1);
    assert.equal(mine.held, 0, "reports in_flight without held: holds none");
    assert.deepEqual(mine.held_jobs, []);
    await client.engine.upsertRuntime({
      id: "test-runtime",
      hostname: "h",
      pid: 1,
      queues: ["run"],
      ready: true,
      leader: false,
      health: { in_flight: 0, held: 1, held_jobs: [b.id] },
    });
    const held = (await call("GET", "/api/runtimes")).body.runtimes.find((r: any) => r.id === "test-runtime");
    assert.equal(held.held, 1);
    assert.deepEqual(held.held_jobs, [b.id]);

    for (const bad of ["0", "1001", "x", "1.5", "-1"]) {
      assertInvalid(await call("GET", `/api/running?limit=${bad}`));
    }
  }));

Deno.test("GET /api/running: none running is an empty list", () =>
  withApi(async ({ call }) => {
    const a = await call("GET", "/api/running");
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, { jobs: [], truncated: false });
  }));

Deno.test("POST /api/jobs/bulk-retry and bulk-cancel with dry_run: the count, and nothing changes", () =>
  withApi(async ({ call, client }) => {
    const jobs = await client.enqueueMany([
      { kind: "k", queue: "bulk", args: { n: 1 } },
      { kind: "k", queue: "bulk", args: { n: 2 } },
      { kind: "other", queue: "bulk", args: { n: 3 } },
    ]);
    await setState(client, [jobs[0].id], "failed", [{ error: "boom" }]);

    const cancel = await call("POST", "/api/jobs/bulk-cancel", { queue: "bulk", dry_run: true });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.deepEqual(cancel.body, { count: 2 });
    const retry = await call("POST", "/api/jobs/bulk-retry", {
      state: "failed",
      queue: "bulk",
      dry_run: true,
    });
    assert.deepEqual(retry.body, { count: 1 });
    const byKind = await call("POST", "/api/jobs/bulk-cancel", { kind: "other", dry_run: true });
    assert.deepEqual(byKind.body, { count: 1 });
    // Nothing changed.
    assert.deepEqual(
      await Promise.all(jobs.map(async (j) => (await client.getJob(j.id))!.state)),
      ["failed", "available", "available"],
    );
    // dry_run false acts, and says how many it touched.
    assert.deepEqual((await call("POST", "/api/jobs/bulk-cancel", { kind: "other", dry_run: false })).body, {
      count: 1,
    });
    assert.equal((await client.getJob(jobs[2].id))!.state, "cancelled");

    for (const bad of ["yes", 1, null]) {
      assertInvalid(await call("POST", "/api/jobs/bulk-cancel", { queue: "bulk", dry_run: bad }));
    }
  }));

Deno.test("bulk dry runs are mutations: refused in read-only mode before anything else", () =>
  withApi(async ({ call }) => {
    const a = await call("POST", "/api/jobs/bulk-cancel", { dry_run: true });
    assert.equal(a.status, 503);
    assert.equal(a.body.code, "read_only");
  }, { readOnly: true }));

Deno.test("bulk retry, cancel and delete by ids: each named job alone, the others listed as skipped", async () => {
  const log = { info: [] as string[], error: [] as string[] };
  await withApi(async ({ call, client }) => {
    const [a, b, c, d] = await client.enqueueMany([
      { kind: "k", queue: "ids", args: { n: 1 } },
      { kind: "k", queue: "ids", args: { n: 2 } },
      { kind: "k", queue: "ids", args: { n: 3 } },
      { kind: "k", queue: "ids", args: { n: 4 } },
    ]);
    await setState(client, [a.id], "failed", [{ error: "boom" }]);
    await setState(client, [b.id], "completed");
    await claimById(client, c.id);
    const gone = d.id + 1000;
    const state = async (id: number) => (await client.getJob(id))?.state ?? null;

    // Dry runs count what the action applies to and change nothing.
    const dryCancel = await call("POST", "/api/jobs/bulk-cancel", {
      ids: [a.id, c.id, d.id, gone],
      dry_run: true,
    });
    assert.equal(dryCancel.status, 200, JSON.stringify(dryCancel.body));
    assert.equal(dryCancel.body.count, 2);
    assert.deepEqual(dryCancel.body.skipped.map((s: any) => [s.id, s.code]), [
      [a.id, "invalid_state"],
      [gone, "not_found"],
    ]);
    const dryRetry = await call("POST", "/api/jobs/bulk-retry", { ids: [a.id, b.id, c.id], dry_run: true });
    assert.equal(dryRetry.body.count, 2);
    assert.deepEqual(dryRetry.body.skipped.map((s: any) => [s.id, s.code]), [[c.id, "invalid_state"]]);
    assert.deepEqual(await Promise.all([a, b, c, d].map((j) => state(j.id))), [
      "failed",
      "completed",
      "running",
      "available",
    ]);

    // Cancel the unfinished ones (running and available); the failed one is skipped.
    const cancel = await call("POST", "/api/jobs/bulk-cancel", { ids: [a.id, c.id, d.id] });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.equal(cancel.body.count, 2);
    assert.deepEqual(cancel.body.skipped.map((s: any) => s.id), [a.id]);
    assert.match(cancel.body.skipped[0].error, /failed|finished|cancel/);
    assert.equal(await state(c.id), "cancelled");
    assert.equal(await state(d.id), "cancelled");

    // Retry a and c (finished now); b is left alone since it is not named.
    const retry = await call("POST", "/api/jobs/bulk-retry", { ids: [a.id, c.id] });
    assert.deepEqual(retry.body, { count: 2, skipped: [] });
    assert.equal(await state(a.id), "available");
    assert.equal(await state(c.id), "available");
    assert.equal(await state(b.id), "completed");

    // Delete: finished jobs only, each audited; an available one is skipped and stays.
    const del = await call("POST", "/api/jobs/bulk-delete", { ids: [b.id, d.id, a.id, gone] });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.equal(del.body.count, 2);
    assert.deepEqual(del.body.skipped.map((s: any) => [s.id, s.code]), [[a.id, "invalid_state"], [
      gone,
      "not_found",
    ]]);
    assert.equal(await state(b.id), null);
    assert.equal(await state(d.id), null);
    assert.equal(await state(a.id), "available");
    const audit = log.info.filter((l) => l.startsWith("svc: audit: "));
    assert.equal(audit.length, 2, log.info.join("\n"));
    assert.match(audit[0], new RegExp(`^svc: audit: job ${b.id} deleted through the admin API`));

    // Bad requests: ids with a filter, empty, repeated, too many, not integers; delete needs ids.
    assertInvalid(await call("POST", "/api/jobs/bulk-cancel", { ids: [a.id], queue: "ids" }));
    assertInvalid(await call("POST", "/api/jobs/bulk-retry", { ids: [] }));
    assertInvalid(await call("POST", "/api/jobs/bulk-retry", { ids: [a.id, a.id] }));
    assertInvalid(
      await call("POST", "/api/jobs/bulk-cancel", { ids: Array.from({ length: 501 }, (_, i) => i + 1) }),
    );
    for (const bad of [[0], ["1"], [1.5], "1", null]) {
      assertInvalid(await call("POST", "/api/jobs/bulk-cancel", { ids: bad }));
    }
    assertInvalid(await call("POST", "/api/jobs/bulk-delete", {}));
    assertInvalid(await call("POST", "/api/jobs/bulk-delete", { ids: [a.id], state: "failed" }));
    assert.equal(await state(a.id), "available");
  }, { log });
});

Deno.test("bulk delete by ids is a mutation: refused in read-only mode", () =>
  withApi(async ({ call }) => {
    const a = await call("POST", "/api/jobs/bulk-delete", { ids: [1], dry_run: true });
    assert.equal(a.status, 503);
    assert.equal(a.body.code, "read_only");
  }, { readOnly: true }));

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

Deno.test("GET /api/running: started jobs first, prefetched ones apart (attempted_at null), bounded", () =>
  withApi(async ({ call, client }) => {
    const [a, b, c] = await client.enqueueMany([
      { kind: "k", queue: "run", args: { n: 1 } },
      { kind: "k", queue: "run", args: { n: 2 } },
      { kind: "k", queue: "run", args: { n: 3 } },
    ]);
    await claimById(client, a.id); // started
    await claimById(client, b.id, {}, { start: false }); // prefetched, never started
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
    assert.ok(all.body.jobs[0].attempted_at, "the started job has a start");
    assert.equal(all.body.jobs[1].attempted_at, null, "the prefetched job has none");
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

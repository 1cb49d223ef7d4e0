/**
 * Parks and callback resolutions that arrive together share one statement (group commit). Each item
 * must still get its own answer, exactly as if it had been written alone.
 */
import { claim } from "../helpers/claim.ts";
import assert from "node:assert/strict";
import { jobRows, withSchema } from "../helpers/db.ts";
import type { Client } from "../../src/client/client.ts";

/** Claims `count` HTTP jobs so that each gets a registered callback; returns [jobId, lease, callbackId]. */
async function claimWithCallbacks(client: Client, count: number) {
  await client.enqueueMany(Array.from({ length: count }, () => ({ kind: "fn" })));
  const jobs = await claim(client, "default", count, "rt-test", { fn: 60_000 }, { fn: 60_000 });
  assert.equal(jobs.length, count);
  return jobs.map((j) => ({ id: j.id, lease: j.lease, callbackId: j.callbackId! }));
}

/** `count` HTTP jobs claimed and parked in `waiting_external`. */
async function parkedWithCallbacks(client: Client, count: number) {
  const jobs = await claimWithCallbacks(client, count);
  await Promise.all(
    jobs.map((j) => client.engine.park({ id: j.id, lease: j.lease, callbackId: j.callbackId })),
  );
  return jobs;
}

Deno.test("parks sent together are written together and each gets its own answer", () =>
  withSchema(async (client) => {
    const jobs = await claimWithCallbacks(client, 20);
    // Job 0's callback is resolved before its park: that park must do nothing.
    await client.completeExternal(jobs[0].callbackId, { early: true });
    // Job 1's park carries a stale lease: it must do nothing either.
    const parked = await Promise.all(
      jobs.map((j, i) =>
        client.engine.park({ id: j.id, lease: i === 1 ? j.lease + 1 : j.lease, callbackId: j.callbackId })
      ),
    );
    assert.deepEqual(parked, jobs.map((_, i) => i > 1));
    const rows = await jobRows(client);
    assert.deepEqual(rows.map((r) => r.state), [
      "completed",
      "running",
      ...Array(18).fill("waiting_external"),
    ]);
  }));

Deno.test("callback resolutions sent together: each is resolved as if alone, duplicates and unknown ids included", () =>
  withSchema(async (client, schema, sql) => {
    const jobs = await parkedWithCallbacks(client, 12);
    const e = client.engine;
    const results = await Promise.allSettled([
      ...jobs.slice(0, 8).map((j, i) => e.resolveCallback(j.callbackId, "complete", { payload: { n: i } })),
      e.resolveCallback(jobs[0].callbackId, "complete", { payload: { n: "again" } }), // duplicate in the batch
      e.resolveCallback(jobs[8].callbackId, "fail", { error: "boom", retryable: false }),
      e.resolveCallback(jobs[9].callbackId, "fail", { error: "flaky", retryable: true }),
      e.resolveCallback(jobs[10].callbackId, "heartbeat", { timeoutSeconds: 120 }),
      e.resolveCallback(crypto.randomUUID(), "complete", { payload: null }),
      e.resolveCallback(jobs[11].callbackId, "complete", { payload: null }), // JSON null, not SQL NULL
    ]);
    const v = results.map((r) => (r.status === "fulfilled" ? r.value : r.reason));
    for (let i = 0; i < 8; i++) assert.deepEqual([v[i].outcome, v[i].state], ["ok", "completed"]);
    assert.equal(v[8].outcome, "not_pending", "the second complete of one callback finds it resolved");
    assert.deepEqual([v[9].outcome, v[9].state], ["ok", "failed"]);
    assert.deepEqual([v[10].outcome, v[10].state], ["ok", "retryable"]);
    assert.equal(v[11].outcome, "ok");
    assert.ok(v[11].timeoutAt instanceof Date && +v[11].timeoutAt > Date.now() + 100_000);
    assert.equal(v[12].outcome, "not_found");
    assert.deepEqual([v[13].outcome, v[13].state], ["ok", "completed"]);
    const rows = await jobRows(client);
    assert.deepEqual(rows.slice(0, 8).map((r) => r.result), [0, 1, 2, 3, 4, 5, 6, 7].map((n) => ({ n })));
    assert.deepEqual(rows.slice(8).map((r) => r.state), [
      "failed",
      "retryable",
      "waiting_external",
      "completed",
    ]);
    const [stored] = await sql.unsafe(`select ${schema}.get_job($1) -> 'result' as r`, [rows[11].id]);
    assert.equal(JSON.stringify(stored.r), "null", "a JSON null payload is stored as JSON null");
  }));

Deno.test("a resolution the database refuses fails alone; the others in its batch are resolved", () =>
  withSchema(async (client) => {
    const jobs = await parkedWithCallbacks(client, 3);
    const e = client.engine;
    const results = await Promise.allSettled([
      e.resolveCallback(jobs[0].callbackId, "complete", { payload: 1 }),
      e.resolveCallback(jobs[1].callbackId, "explode" as any, {}),
      e.resolveCallback(jobs[2].callbackId, "complete", { payload: 3 }),
    ]);
    assert.equal(results[0].status, "fulfilled");
    assert.equal(results[1].status, "rejected");
    assert.match(String((results[1] as PromiseRejectedResult).reason), /unknown action/);
    assert.equal(results[2].status, "fulfilled");
    const rows = await jobRows(client);
    assert.deepEqual(rows.map((r) => r.state), ["completed", "waiting_external", "completed"]);
  }));

Deno.test("large payloads resolved together are split across statements and each lands on its own job", () =>
  withSchema(async (client) => {
    const jobs = await parkedWithCallbacks(client, 10);
    const big = (i: number) => ({ i, blob: String.fromCharCode(97 + i).repeat(1024 * 1024 - 32) });
    const results = await Promise.all(
      jobs.map((j, i) => client.engine.resolveCallback(j.callbackId, "complete", { payload: big(i) })),
    );
    assert.deepEqual(results.map((r) => [r.outcome, r.jobId]), jobs.map((j) => ["ok", j.id]));
    const rows = await jobRows(client);
    assert.deepEqual(
      rows.map((r) => {
        const p = r.result as { i: number; blob: string };
        return [r.id, p.i, p.blob.length, p.blob[0]];
      }),
      jobs.map((j, i) => [j.id, i, 1024 * 1024 - 32, String.fromCharCode(97 + i)]),
    );
  }));

Deno.test("failures sent together are written together and each gets its own answer", () =>
  withSchema(async (client) => {
    await client.enqueueMany(
      Array.from({ length: 12 }, (_, i) => ({ kind: "k", maxAttempts: i < 6 ? 1 : 5 })),
    );
    const jobs = await claim(client, "default", 12, "rt-test");
    assert.equal(jobs.length, 12);
    const failure = (j: { id: number; lease: number }, lease = j.lease) => ({
      id: j.id,
      lease,
      error: `boom ${j.id}`,
      terminal: false,
      startedAt: new Date(),
    });
    // Job 0 is cancelled before its failure arrives, job 1's failure carries a stale lease as well as its
    // own (two attempts of one job in one batch): those answers are null, the others their failed jobs.
    await client.cancel(jobs[0].id);
    const out = await Promise.all([
      ...jobs.map((j) => client.engine.fail(failure(j))),
      client.engine.fail(failure(jobs[1], jobs[1].lease + 1)),
    ]);
    assert.equal(out[0], null, "cancelled first");
    assert.equal(out[12], null, "a stale lease changes nothing");
    for (let i = 1; i < 12; i++) {
      assert.equal(out[i]?.id, jobs[i].id, `job ${i}`);
      assert.equal(out[i]?.state, i < 6 ? "failed" : "retryable", `job ${i}`);
      assert.equal(out[i]?.errors.at(-1)?.error, `boom ${jobs[i].id}`);
    }
  }));

/**
 * Deleting a finished job: DELETE /api/jobs/:id and client.deleteJob on both engines (every life of a
 * retried job, a completion still in the ring on queue storage, callbacks), the refusals (unfinished: 409,
 * unknown: 404, read-only: 503, another site's page: 403), and the audit line in the server log.
 */
import assert from "node:assert/strict";
import { type CapturedLog, claimById, setState, withApi } from "../helpers/admin.ts";
import { engineTest, withSchema } from "../helpers/db.ts";

Deno.test("DELETE /api/jobs/:id deletes a completed, failed or cancelled job for good; the server log has an audit line", async () => {
  const log: CapturedLog = { info: [], error: [] };
  await withApi(async ({ call, client }) => {
    const [done, failed, cancelled, retried, keep] = await client.enqueueMany([
      { kind: "mail", queue: "q1", args: { n: 1 } },
      { kind: "mail", queue: "q1", args: { n: 2 } },
      { kind: "mail", queue: "q1", args: { n: 3 } },
      { kind: "mail", queue: "q1", args: { n: 4 } },
      { kind: "mail", queue: "q1", args: { n: 5 } },
    ]);
    await setState(client, [done.id, keep.id], "completed");
    await setState(client, [failed.id], "failed", [{ error: "boom" }]);
    await client.cancel(cancelled.id);
    // Two lives: failed twice, completed, retried by hand, completed again.
    await setState(client, [retried.id], "completed", [{ error: "e1" }, { error: "e2" }]);
    await client.retry(retried.id);
    await setState(client, [retried.id], "completed");
    const cb = await client.enqueue("mail", { n: 6 }, { queue: "q1" });
    const claimed = await claimById(client, cb.id);
    const callbackId = await client.engine.registerCallback({
      id: cb.id,
      lease: claimed.lease,
      timeoutMs: 60_000,
      kind: "in_process",
    });
    assert.ok(callbackId);
    await client.engine.complete([{ id: cb.id, lease: claimed.lease, result: 1 }], { keepCompleted: true });

    for (const job of [done, failed, cancelled, retried, cb]) {
      const before = (await client.getJob(job.id))!;
      const a = await call("DELETE", `/api/jobs/${job.id}`);
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(a.body.job.id, job.id);
      assert.equal(a.body.job.state, before.state, "the answer is the job as it was");
      assert.equal(await client.getJob(job.id), null, `job ${job.id} (${before.state}) is gone`);
      const again = await call("DELETE", `/api/jobs/${job.id}`);
      assert.equal(again.status, 404, "a second delete finds nothing");
      assert.equal(again.body.code, "not_found");
      assert.equal((await call("GET", `/api/jobs/${job.id}`)).status, 404);
      assert.equal((await call("POST", `/api/jobs/${job.id}/retry`)).status, 404, "nothing left to retry");
    }
    assert.deepEqual(await client.listCallbacks(cb.id), [], "its callbacks went with it");
    const listed = (await client.listJobs({ limit: 100 })).jobs.map((j) => j.id);
    assert.deepEqual(listed, [keep.id], "only the job nobody deleted is listed");
    assert.equal((await client.getJob(keep.id))!.state, "completed");
    const completedNow = await client.listJobs({ state: "completed" });
    assert.deepEqual(completedNow.jobs.map((j) => j.id), [keep.id]);

    const audit = log.info.filter((l) => l.startsWith("svc: audit: "));
    assert.equal(audit.length, 5, log.info.join("\n"));
    assert.match(
      audit[0],
      new RegExp(
        `^svc: audit: job ${done.id} deleted through the admin API \\(kind mail, queue q1, completed, attempt 1, created `,
      ),
    );
    assert.ok(log.info.some((l) => l.startsWith(`DELETE /api/jobs/${done.id} 200 `)), "and the request line");
  }, { log });
});

Deno.test("DELETE /api/jobs/:id: unfinished jobs are 409 invalid_state and stay as they were; bad ids 400; unknown 404", () =>
  withApi(async ({ call, client }) => {
    const [avail, running, scheduled] = await client.enqueueMany([
      { kind: "k", queue: "q2" },
      { kind: "k", queue: "q2" },
      { kind: "k", queue: "q2", runAt: new Date(Date.now() + 3_600_000) },
    ]);
    await claimById(client, running.id);
    for (
      const [job, state] of [[avail, "available"], [running, "running"], [scheduled, "scheduled"]] as const
    ) {
      const a = await call("DELETE", `/api/jobs/${job.id}`);
      assert.equal(a.status, 409, JSON.stringify(a.body));
      assert.equal(a.body.code, "invalid_state");
      assert.match(
        a.body.error,
        new RegExp(`job ${job.id} is ${state}: only a completed, failed or cancelled job can be deleted`),
      );
      assert.equal((await client.getJob(job.id))!.state, state);
    }
    for (const bad of ["0", "x", "1.5", "-3", "99999999999999999"]) {
      const a = await call("DELETE", `/api/jobs/${bad}`);
      assert.equal(a.status, 400, `${bad}: ${JSON.stringify(a.body)}`);
      assert.equal(a.body.code, "invalid_request");
    }
    const unknown = await call("DELETE", "/api/jobs/987654");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, "not_found");
    // The collection takes no DELETE: 405 naming the methods.
    const all = await call("DELETE", "/api/jobs");
    assert.equal(all.status, 405);
    assert.match(all.headers.get("allow") ?? "", /GET/);
    // The client refuses the same way.
    await assert.rejects(
      () => client.deleteJob(avail.id),
      /only a completed, failed or cancelled job can be deleted/,
    );
  }));

Deno.test("DELETE /api/jobs/:id: read-only is 503 and another site's page is 403; nothing is deleted", async () => {
  for (const opts of [{ readOnly: true }, {}]) {
    await withApi(async ({ call, client }) => {
      const j = await client.enqueue("k", {});
      await setState(client, [j.id], "completed");
      const a = opts.readOnly
        ? await call("DELETE", `/api/jobs/${j.id}`)
        : await call("DELETE", `/api/jobs/${j.id}`, undefined, { origin: "https://evil.example" });
      assert.equal(a.status, opts.readOnly ? 503 : 403, JSON.stringify(a.body));
      assert.equal(a.body.code, opts.readOnly ? "read_only" : "cross_origin");
      assert.equal((await client.getJob(j.id))!.state, "completed");
    }, opts);
  }
});

engineTest(
  "queue_storage",
  "deleteJob on queue storage: a completion in the ring is hidden at once, stays hidden, and its rows go with their slot",
  () =>
    withSchema(async (client, schema, sql) => {
      const q = `"${schema}_qs"`;
      const [a, b, c] = await client.enqueueMany([{ kind: "k" }, { kind: "k" }, { kind: "k" }]);
      const [{ s: s0 }] = await sql.unsafe(`select ${q}.current_slot() as s`);
      await sql.unsafe(`select ${q}.rotate(0)`);
      await sql.unsafe(`select ${q}.sync_position()`);
      const claimed = await client.engine.claim({
        queue: "default",
        limit: 10,
        free: 10,
        runtimeId: "rt",
        policies: {},
        callbackTimeoutsMs: {},
        prefetchTtlMs: 60_000,
      });
      assert.equal(claimed.length, 3);
      await client.engine.complete(claimed.map((j) => ({ id: j.id, lease: j.lease, result: j.id })), {
        keepCompleted: true,
      });
      await client.deleteJob(a.id); // its rows are in the sealed slot s0
      assert.equal(await client.getJob(a.id), null);
      assert.deepEqual((await client.listJobs()).jobs.map((j) => j.id).sort(), [b.id, c.id].sort());
      // The slot's counts still hold: it is retained for the completed retention, then reclaimed.
      const [kept] = await sql.unsafe(`select ${q}.prune($1, 0, false, 3600000) as o`, [s0]);
      assert.equal(kept.o, "retained");
      await client.deleteJob(b.id);
      assert.equal(await client.getJob(b.id), null);
      assert.equal((await client.getJob(c.id))!.state, "completed", "the other completion stays");
      const [p] = await sql.unsafe(`select ${q}.prune($1, 0, false, 0) as o`, [s0]);
      assert.equal(p.o, "pruned");
      for (const id of [a.id, b.id]) assert.equal(await client.getJob(id), null, `job ${id} stays deleted`);
      // The leader's cleanup drops tombstones whose rows are gone.
      await client.engine.cleanup({ completed: 86_400_000, failed: 86_400_000 });
      const [t] = await sql.unsafe(`select count(*) as n from ${q}.deleted`);
      assert.equal(Number(t.n), 0);
    }),
);

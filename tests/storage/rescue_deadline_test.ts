/**
 * The leader's rescue is the backstop for hard deadlines: the worker running an attempt enforces its
 * deadline itself, so the leader steps in only DEADLINE_GRACE_MS after it (a worker whose handler
 * blocks its event loop cannot). Stale heartbeats are rescued as before.
 */
import { claim } from "../helpers/claim.ts";
import assert from "node:assert/strict";
import { engineTest, liveRuntime, setDeadline, staleRuntime, withSchema } from "../helpers/db.ts";
import { DEADLINE_GRACE_MS } from "../../src/storage/shared/attempts.ts";

Deno.test("rescue: a passed deadline waits out the grace, then the attempt is retried with 'deadline exceeded'", () =>
  withSchema(async (client) => {
    const [a, b, c] = await client.enqueueMany([{ kind: "k" }, { kind: "k" }, { kind: "k" }]);
    await liveRuntime(client, "rt");
    // One claim each: a claim keeps its jobs' policies, and setDeadline changes its kind's timeout.
    const claimed = [
      ...await claim(client, "default", 1, "rt", { k: 60_000 }),
      ...await claim(client, "default", 1, "rt", { k: 60_000 }),
    ];
    assert.deepEqual(claimed.map((j) => j.id), [a.id, b.id]);
    assert.equal((await claim(client, "default", 1, "rt-dead", { k: 60_000 }))[0].id, c.id);
    // a: deadline passed just now (within the grace); b: passed longer ago than the grace; c: its runtime died.
    await setDeadline(client, a.id, "now() - interval '10 milliseconds'");
    await setDeadline(client, b.id, `now() - (${DEADLINE_GRACE_MS} + 500) * interval '1 millisecond'`);
    await staleRuntime(client, "rt-dead");

    const rescued = await client.engine.rescue(90_000);
    assert.deepEqual(
      rescued.map((r) => [r.id, r.state, r.reason]).sort(),
      [[b.id, "retryable", "deadline exceeded"], [c.id, "retryable", "heartbeat stale: worker presumed dead"]]
        .sort(),
    );
    assert.equal((await client.getJob(a.id))!.state, "running", "still the worker's to enforce");
    assert.match((await client.getJob(b.id))!.errors[0].error, /rescued: deadline exceeded/);
  }));

Deno.test("rescue: an attempt claimed within rescueAfter is not rescued, even when its runtime's heartbeat is stale", () =>
  withSchema(async (client) => {
    // A worker cut off from the database (its heartbeats failing) claims again as soon as the server is back,
    // before its next heartbeat lands: the claim itself shows it alive, so the leader waits rescueAfter from
    // the claim (rescuing it then would run the job twice and free its unit of a concurrency limit while its
    // handler runs).
    const [job] = await client.enqueueMany([{ kind: "k" }]);
    await liveRuntime(client, "rt-late");
    await client.sql.unsafe(
      `update "${client.schema}".runtimes set heartbeat_at = now() - interval '10 minutes' where id = 'rt-late'`,
    );
    assert.equal((await claim(client, "default", 1, "rt-late"))[0].id, job.id);
    assert.deepEqual(await client.engine.rescue(60_000), [], "claimed just now");
    assert.equal((await client.getJob(job.id))!.state, "running");
    // Once the claim is older than rescueAfter too, the attempt is rescued (here rescueAfter is 10 ms).
    await new Promise((r) => setTimeout(r, 50));
    const rescued = await client.engine.rescue(10);
    assert.deepEqual(rescued.map((r) => [r.id, r.state]), [[job.id, "retryable"]]);
  }));

engineTest(
  "queue_storage",
  "rescue: a dead runtime's row is written when a sweep finds its attempts, not on every sweep after",
  () =>
    withSchema(async (client) => {
      await client.enqueue("k", {});
      const [job] = await claim(client, "default", 1, "rt-dead");
      assert.ok(job);
      await staleRuntime(client, "rt-dead");
      const row = async () =>
        (await client.sql.unsafe(
          `select xmin::text as x, swept_at from "${client.schema}".runtimes where id = 'rt-dead'`,
        ))[0];
      const rescued = await client.engine.rescue(1_000);
      assert.deepEqual(rescued.map((r) => r.id), [job.id]);
      const first = await row();
      assert.ok(first.swept_at, "the sweep that found its attempt records itself");
      // Ten more sweeps find nothing of the dead runtime: its row is not written again.
      for (let i = 0; i < 10; i++) assert.deepEqual(await client.engine.rescue(1_000), []);
      assert.deepEqual(await row(), first);
    }),
);

/**
 * The leader's rescue is the backstop for hard deadlines: the worker running an attempt enforces its
 * deadline itself, so the leader steps in only DEADLINE_GRACE_MS after it (a worker whose handler
 * blocks its event loop cannot). Stale heartbeats are rescued as before.
 */
import { claim } from "../helpers/claim.ts";
import assert from "node:assert/strict";
import { withSchema } from "../helpers/db.ts";
import { DEADLINE_GRACE_MS } from "../../src/storage/canonical/maintenance.ts";

Deno.test("rescue: a passed deadline waits out the grace, then the attempt is retried with 'deadline exceeded'", () =>
  withSchema(async (client, schema, sql) => {
    const [a, b, c] = await client.enqueueMany([{ kind: "k" }, { kind: "k" }, { kind: "k" }]);
    const claimed = await claim(client, "default", 3, "rt", { k: 60_000 });
    assert.equal(claimed.length, 3);
    // a: deadline passed just now (within the grace); b: passed longer ago than the grace; c: heartbeat stale.
    await sql.unsafe(
      `update "${schema}".jobs set deadline_at = now() - interval '10 milliseconds' where id = $1`,
      [a.id],
    );
    await sql.unsafe(
      `update "${schema}".jobs set deadline_at = now() - ($2::bigint + 500) * interval '1 millisecond' where id = $1`,
      [b.id, DEADLINE_GRACE_MS],
    );
    await sql.unsafe(
      `update "${schema}".jobs set heartbeat_at = now() - interval '10 minutes' where id = $1`,
      [c.id],
    );

    const rescued = await client.engine.rescue(90_000);
    assert.deepEqual(
      rescued.map((r) => [r.id, r.state, r.reason]).sort(),
      [[b.id, "retryable", "deadline exceeded"], [c.id, "retryable", "heartbeat stale: worker presumed dead"]]
        .sort(),
    );
    assert.equal((await client.getJob(a.id))!.state, "running", "still the worker's to enforce");
    assert.match((await client.getJob(b.id))!.errors[0].error, /rescued: deadline exceeded/);
  }));

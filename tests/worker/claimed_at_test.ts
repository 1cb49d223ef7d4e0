/**
 * `claimed_at` and `attempted_at` (docs/reference/job-states.md): a claim writes `claimed_at`; the handler's
 * start is written with the outcome as `attempted_at`, null while the attempt runs; every path that ends an
 * attempt writes it (completion, failure, snooze, cancel, rescue), and the SQL API, REST and the client show
 * both. On each storage engine.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { snooze } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";
import type { Job } from "../../src/types.ts";

/** Waits for the job to reach `state` and returns it. */
async function inState(client: Client, id: number, state: string): Promise<Job> {
  return (await waitFor(
    async () => {
      const j = await client.getJob(id);
      return j?.state === state ? j : null;
    },
    10_000,
    `job ${id} ${state}`,
  ))!;
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => open = r);
  return { wait, open };
}

Deno.test("claimed_at is set at claim and attempted_at null while running; a completion writes the handler's start", async () => {
  const { client, schema, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const g = gate();
    let startedAt = 0;
    w = await startWorker(client, {
      queues: { default: { maxWorkers: 1 } },
      handlers: {
        slow: async () => {
          startedAt = Date.now();
          await g.wait;
          return "ok";
        },
      },
    });
    const job = await client.enqueue("slow", {});
    assert.equal(job.claimedAt, null, "not claimed at enqueue");
    assert.equal(job.attemptedAt, null);
    const running = await inState(client, job.id, "running");
    assert.ok(running.claimedAt instanceof Date);
    assert.equal(running.attemptedAt, null, "the start is not written while the attempt runs");
    // The SQL API shows the same.
    const [sqlJob] = await client.sql.unsafe(`select "${schema}".get_job($1) as j`, [job.id]);
    assert.equal(sqlJob.j.attempted_at, null);
    assert.equal(typeof sqlJob.j.claimed_at, "string");
    assert.equal(new Date(sqlJob.j.claimed_at).getTime(), running.claimedAt!.getTime());
    g.open();
    const done = await inState(client, job.id, "completed");
    assert.equal(done.claimedAt!.getTime(), running.claimedAt!.getTime(), "claimed_at kept");
    assert.ok(done.attemptedAt instanceof Date, "attempted_at written with the completion");
    assert.ok(+done.attemptedAt! >= +done.claimedAt!);
    assert.ok(Math.abs(+done.attemptedAt! - startedAt) < 1_000, "attempted_at is the handler's start");
    // The stable SQL API's enqueue returns the column too.
    const [row] = await client.sql.unsafe(
      `select claimed_at, attempted_at from "${schema}".enqueue('x', '{}')`,
    );
    assert.equal(row.claimed_at, null);
    assert.equal(row.attempted_at, null);
  } finally {
    await w?.stop();
    await drop();
  }
});

Deno.test("a failed, a snoozed and a cancelled attempt get attempted_at", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const g = gate();
    w = await startWorker(client, {
      queues: { default: { maxWorkers: 3 } },
      handlers: {
        boom: () => {
          throw new Error("boom");
        },
        later: () => snooze(60_000),
        hang: async (_job, { signal }) => {
          await Promise.race([g.wait, new Promise((r) => signal.addEventListener("abort", r))]);
        },
      },
    });
    const [boom, later, hang] = await client.enqueueMany([
      { kind: "boom", maxAttempts: 3 },
      { kind: "later" },
      { kind: "hang" },
    ]);
    const retryable = await inState(client, boom.id, "retryable");
    assert.ok(retryable.claimedAt instanceof Date);
    assert.ok(retryable.attemptedAt instanceof Date, "a failure writes the start");
    assert.ok(+retryable.attemptedAt! >= +retryable.claimedAt!);
    const scheduled = await inState(client, later.id, "scheduled");
    assert.ok(scheduled.claimedAt instanceof Date);
    assert.ok(scheduled.attemptedAt instanceof Date, "a snooze writes the start");
    await inState(client, hang.id, "running");
    const cancelled = await client.cancel(hang.id);
    assert.equal(cancelled.state, "cancelled");
    assert.ok(cancelled.claimedAt instanceof Date);
    assert.ok(
      cancelled.attemptedAt instanceof Date,
      "a cancel of a running attempt writes its start (its claim)",
    );
    g.open();
  } finally {
    await w?.stop();
    await drop();
  }
});

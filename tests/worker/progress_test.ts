/**
 * `ctx.progress`: the latest value wins, is written at most once a second per job in one statement for
 * every job with news, and is returned with the job (client, REST `GET /api/jobs/:id` and `/api/running`,
 * `svc job get --json`) while it belongs to the job's latest attempt; a value over 4 KB or not JSON is
 * refused at once with a ValidationError, the stored value unchanged. On the engine of the run.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { send } from "../helpers/admin.ts";
import { svcIn } from "../helpers/cli.ts";
import { createAdminServer } from "../../src/http/server.ts";
import { ProgressWriter } from "../../src/worker/progress.ts";
import { type ProgressItem, pruneProgress } from "../../src/storage/shared/progress.ts";
import { type Job, PROGRESS_MAX_BYTES, silentLogger, ValidationError } from "../../mod.ts";

Deno.test("progress writer: latest value per job, one statement per flush, each job at most once a second", async () => {
  const writes: { at: number; items: ProgressItem[] }[] = [];
  const w = new ProgressWriter((items) => {
    writes.push({ at: Date.now(), items });
    return Promise.resolve();
  }, silentLogger);
  const job = (id: number, lease = 1) => ({ id, lease }) as Job;
  const t0 = Date.now();
  // Three jobs report every 10 ms for 2.5 s.
  let n = 0;
  while (Date.now() - t0 < 2_500) {
    n++;
    for (const id of [1, 2, 3]) w.report(job(id), JSON.stringify({ n }));
    await new Promise((r) => setTimeout(r, 10));
  }
  await w.close();
  assert.ok(
    writes.length >= 2 && writes.length <= 4,
    `a few statements for ${n * 3} reports: ${writes.length}`,
  );
  for (let i = 1; i < writes.length - 1; i++) {
    assert.ok(
      writes[i].at - writes[i - 1].at >= 990,
      `a second between writes: ${writes[i].at - writes[i - 1].at}`,
    );
  }
  for (const wr of writes) {
    assert.deepEqual(wr.items.map((it) => it.id).sort(), [1, 2, 3], "each job once per statement, batched");
  }
  const last = writes[writes.length - 1].items;
  assert.deepEqual(last.map((it) => JSON.parse(it.json).n), [n, n, n], "the latest values, written at close");
  const before = writes.length;
  w.report(job(1), "1");
  await new Promise((r) => setTimeout(r, 1_100));
  assert.equal(writes.length, before, "nothing after close");
});

Deno.test("ctx.progress: stored on the attempt, shown by the client, the REST API and svc job get; capped", async () => {
  const { client, drop, schema } = await testClient();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const refused: unknown[] = [];
  const { stop } = await startWorker(client, {
    handlers: {
      report: {
        handler: async (job, ctx) => {
          for (let i = 1; i <= 200; i++) ctx.progress({ done: i, of: 200 });
          for (const bad of ["x".repeat(PROGRESS_MAX_BYTES), { n: Number.NaN }]) {
            try {
              ctx.progress(bad);
            } catch (e) {
              refused.push(e);
            }
          }
          await released;
          if (job.attempt === 1) throw new Error("again");
          ctx.progress("second attempt");
          // Written (the writer flushes once a second) before the job completes.
          // At most 60 s: the assertion below says so if it never is.
          const t0 = Date.now();
          while (Date.now() - t0 < 60_000) {
            if ((await client.getJob(job.id))?.progress?.value === "second attempt") break;
            await new Promise((r) => setTimeout(r, 100));
          }
          return "done";
        },
        // Long enough for the test to see the job retryable, between its attempts, on a slow machine.
        backoff: () => 4_000,
      },
    },
  });
  const app = createAdminServer(client, { callbackAuth: { kind: "unsigned" } });
  try {
    const job = await client.enqueue("report", {});
    const seen = (await waitFor(async () => (await client.getJob(job.id))!.progress, 10_000, "progress"))!;
    assert.deepEqual(seen.value, { done: 200, of: 200 }, "the latest value wins");
    assert.ok(seen.at instanceof Date);
    assert.equal(refused.length, 2);
    assert.ok(refused.every((e) => e instanceof ValidationError));
    assert.match((refused[0] as Error).message, /^progress is 4098 bytes of JSON, over the cap of 4096/);
    assert.match((refused[1] as Error).message, /^progress: the number NaN has no JSON form/);

    const one = await send(app.fetch, "GET", `/api/jobs/${job.id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.job.progress.value, { done: 200, of: 200 });
    assert.equal(one.body.job.progress.at, seen.at.toISOString());
    const running = await send(app.fetch, "GET", "/api/running");
    const listed = running.body.jobs.find((j: { id: number }) => j.id === job.id);
    assert.deepEqual(listed.progress.value, { done: 200, of: 200 });
    const cli = await svcIn(schema, ["job", "get", String(job.id), "--json"]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual(JSON.parse(cli.stdout).progress.value, { done: 200, of: 200 });

    // The next attempt does not show the first one's progress; its own shows, and stays once it completed.
    release();
    await waitFor(async () => (await client.getJob(job.id))!.state === "retryable", 10_000, "retryable");
    assert.deepEqual(
      (await client.getJob(job.id))!.progress?.value,
      { done: 200, of: 200 },
      "latest attempt's",
    );
    const done = await waitFor(
      async () => {
        const j = (await client.getJob(job.id))!;
        return j.state === "completed" ? j : null;
      },
      60_000,
      "completed",
    );
    assert.equal(done!.attempt, 2);
    assert.equal(done!.progress?.value, "second attempt");
    const fresh = await client.enqueue("nothing", {});
    assert.equal("progress" in (await client.getJob(fresh.id))!, false, "a job without progress has none");
    // The leader's cleanup drops progress older than the longer retention.
    assert.equal(await pruneProgress(client.db, client.names, 60_000), 0);
    await client.db.query(`update ${client.names.q}.attempt_progress set at = at - interval '2 minutes'`);
    assert.equal(await pruneProgress(client.db, client.names, 60_000), 1);
    assert.equal((await client.getJob(job.id))!.progress, undefined);
  } finally {
    release();
    await stop();
    await drop();
  }
});

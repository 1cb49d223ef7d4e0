/**
 * `ctx.transaction`: the handler's own SQL, its follow-up jobs and the job's completion commit together,
 * guarded by the run lease, on the storage engine of the run (SVC_TEST_ENGINE). A follow-up exists if and
 * only if the job completed: a throw inside the callback, a stale lease (the job cancelled before the
 * commit, under READ COMMITTED and REPEATABLE READ; the attempt failed by its deadline) and a kill -9 of the worker process between the
 * handler's SQL and the commit leave nothing of the transaction behind.
 */
import assert from "node:assert/strict";
import { allJobsSql, TEST_ENGINE, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { spawnWorker } from "../helpers/process.ts";
import {
  type Client,
  InvalidStateError,
  type IsolationLevel,
  type Job,
  LeaseLostError,
  type Task,
} from "../../mod.ts";

type Tasks = {
  order: Task<{ n: number; fail?: "inside" | "after" | "result" }, { order: number }>;
  followup: { from: number };
};

const finished = (client: Client, id: number, timeoutMs = 20_000): Promise<Job> =>
  waitFor<Job | null>(
    async () => {
      const j = (await client.getJob(id))!;
      return ["completed", "failed", "retryable", "cancelled"].includes(j.state) ? j : null;
    },
    timeoutMs,
    `job ${id} to finish its attempt`,
  ) as Promise<Job>;

/** The orders table the handlers write to, and what is in it. */
async function ordersTable(client: Client): Promise<() => Promise<number[]>> {
  await client.sql.unsafe(`create table "${client.schema}".orders (n int not null, job_id bigint not null)`);
  return async () =>
    (await client.sql.unsafe(`select n from "${client.schema}".orders order by n`)).map((r) => Number(r.n));
}

/** The follow-up jobs of a job (kind `followup`, args.from = its id). */
async function followUps(client: Client, from: number): Promise<number> {
  const [r] = await client.sql.unsafe(
    `select count(*)::int as n from ${
      allJobsSql(client.schema)
    } j where kind = 'followup' and (args ->> 'from')::bigint = $1`,
    [from],
  );
  return r.n;
}

/** Queue storage: the closures of the job's attempt (completions rows naming it and closed rows); one wins. */
async function closures(client: Client, job: Job): Promise<number> {
  if (TEST_ENGINE === "canonical") return 1;
  const [r] = await client.sql.unsafe(
    `select (select count(*) from "${client.schema}_qs".completions x where $1 = any(x.ids))::int
          + (select count(*) from "${client.schema}_qs".closed c where c.job_id = $1 and c.lease = $2)::int as n`,
    [job.id, job.lease],
  );
  return r.n;
}

Deno.test("ctx.transaction commits the handler's SQL, its follow-ups and the completion together, once", async () => {
  const { client, drop } = await testClient();
  const orders = await ordersTable(client);
  const completed: Job[] = [];
  const { stop } = await startWorker(client, {
    on: { completed: (j) => completed.push(j) },
    handlers: {
      order: async (job, ctx) => {
        const result = await ctx.transaction(async (tx) => {
          await tx.sql`insert into ${
            tx.sql(client.schema)
          }.orders (n, job_id) values (${job.args.n}, ${job.id})`;
          await tx.enqueue("followup", { from: job.id }); // the transaction's own enqueue
          await ctx.enqueue("followup", { from: job.id }); // ctx.enqueue joins the open transaction
          await client.enqueue("followup", { from: job.id }, { tx: tx.sql }); // the client's, with the tx
          return { order: job.args.n };
        });
        assert.deepEqual(result, { order: job.args.n });
        return result;
      },
    },
  });
  try {
    const job = await client.enqueue("order", { n: 7 });
    const done = await finished(client, job.id);
    assert.equal(done.state, "completed");
    assert.deepEqual(done.result, { order: 7 }, "the transaction's value is the job's result");
    assert.deepEqual(await orders(), [7]);
    assert.equal(await followUps(client, job.id), 3);
    await waitFor(() => completed.length === 1, 5_000, "the completed event");
    // The batched completer must not complete it a second time (one closure, one event).
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(completed.length, 1);
    assert.deepEqual(completed[0].result, { order: 7 });
    assert.equal(await closures(client, done), 1);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx.transaction: a throw inside it commits nothing and the attempt fails as any throw does", async () => {
  const { client, drop } = await testClient();
  const orders = await ordersTable(client);
  const told: unknown[] = [];
  const { stop } = await startWorker(client, {
    handlers: {
      order: {
        handler: async (job, ctx) => {
          try {
            return await ctx.transaction(async (tx) => {
              await tx.db.query(`insert into "${client.schema}".orders (n, job_id) values ($1, $2)`, [
                job.args.n,
                job.id,
              ]);
              await ctx.enqueue("followup", { from: job.id });
              if (job.args.fail === "inside") throw new Error("payment refused");
              // A result JSON cannot hold: refused before the completion, so nothing commits either.
              if (job.args.fail === "result") return { order: Number.NaN };
              return { order: job.args.n };
            });
          } catch (e) {
            told.push(e);
            throw e;
          }
        },
        backoff: () => 60_000,
      },
    },
  });
  try {
    const inside = await client.enqueue("order", { n: 1, fail: "inside" }, { maxAttempts: 3 });
    const result = await client.enqueue("order", { n: 2, fail: "result" }, { maxAttempts: 3 });
    const a = await finished(client, inside.id);
    assert.equal(a.state, "retryable");
    assert.equal(a.errors[0].error, "payment refused");
    const b = await finished(client, result.id);
    assert.equal(b.state, "retryable");
    assert.match(b.errors[0].error, /^result: the number NaN has no JSON form/);
    assert.deepEqual(await orders(), [], "nothing of either transaction committed");
    assert.equal(await followUps(client, inside.id), 0);
    assert.equal(await followUps(client, result.id), 0);
    assert.equal(told.length, 2);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx.transaction: once it resolved the job is completed; a later throw changes nothing; no second one", async () => {
  const { client, drop } = await testClient();
  const orders = await ordersTable(client);
  let second: unknown = null;
  const { stop } = await startWorker(client, {
    handlers: {
      order: async (job, ctx) => {
        await ctx.transaction(async (tx) => {
          await tx.db.query(`insert into "${client.schema}".orders (n, job_id) values ($1, $2)`, [
            job.args.n,
            job.id,
          ]);
          return { order: job.args.n };
        });
        second = await ctx.transaction(() => Promise.resolve({ order: 0 })).catch((e) => e);
        throw new Error("after the transaction");
      },
    },
  });
  try {
    const job = await client.enqueue("order", { n: 3, fail: "after" });
    const done = await finished(client, job.id);
    assert.equal(done.state, "completed");
    assert.deepEqual(done.result, { order: 3 });
    assert.deepEqual(done.errors, []);
    assert.deepEqual(await orders(), [3]);
    assert.ok(second instanceof InvalidStateError, `a second transaction is refused: ${second}`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await client.getJob(job.id))!.state, "completed");
  } finally {
    await stop();
    await drop();
  }
});

for (const isolation of ["read committed", "repeatable read"] as IsolationLevel[]) {
  Deno.test(`ctx.transaction (${isolation}): a job cancelled before the commit commits nothing; LeaseLostError`, async () => {
    const { client, drop } = await testClient();
    const orders = await ordersTable(client);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let sqlDone!: () => void;
    const sqlWritten = new Promise<void>((r) => (sqlDone = r));
    let outcome: unknown = "pending";
    const { stop } = await startWorker(client, {
      handlers: {
        order: async (job, ctx) => {
          try {
            return await ctx.transaction(async (tx) => {
              // The first statement takes the snapshot (REPEATABLE READ): it predates the cancel.
              await tx.db.query(`insert into "${client.schema}".orders (n, job_id) values ($1, $2)`, [
                job.args.n,
                job.id,
              ]);
              await tx.enqueue("followup", { from: job.id });
              sqlDone();
              await released;
              return { order: job.args.n };
            }, { isolation });
          } catch (e) {
            outcome = e;
            throw e;
          } finally {
            if (outcome === "pending") outcome = "resolved";
          }
        },
      },
    });
    try {
      const job = await client.enqueue("order", { n: 9 });
      await sqlWritten;
      await client.cancel(job.id);
      release();
      await waitFor(() => outcome !== "pending", 10_000, "the transaction to end");
      assert.ok(outcome instanceof LeaseLostError, `LeaseLostError, got ${outcome}`);
      assert.equal((outcome as LeaseLostError).code, "lease_lost");
      assert.equal((outcome as LeaseLostError).jobId, job.id);
      const after = (await client.getJob(job.id))!;
      assert.equal(after.state, "cancelled");
      assert.deepEqual(await orders(), []);
      assert.equal(await followUps(client, job.id), 0);
    } finally {
      release();
      await stop();
      await drop();
    }
  });
}

Deno.test("ctx.transaction: an attempt failed by its deadline before the commit commits nothing; LeaseLostError", async () => {
  const { client, drop } = await testClient();
  const orders = await ordersTable(client);
  let outcome: unknown = "pending";
  const { stop } = await startWorker(client, {
    handlers: {
      order: {
        handler: async (job, ctx) => {
          try {
            return await ctx.transaction(async (tx) => {
              await tx.db.query(`insert into "${client.schema}".orders (n, job_id) values ($1, $2)`, [
                job.args.n,
                job.id,
              ]);
              await tx.enqueue("followup", { from: job.id });
              // The handler ignores ctx.signal: the worker fails the attempt at its deadline meanwhile.
              await new Promise((r) => setTimeout(r, 1_500));
              return { order: job.args.n };
            });
          } catch (e) {
            outcome = e;
            throw e;
          }
        },
        timeout: 300,
        backoff: () => 60_000,
      },
    },
  });
  try {
    const job = await client.enqueue("order", { n: 4 }, { maxAttempts: 3 });
    const failed = await finished(client, job.id);
    assert.equal(failed.state, "retryable");
    assert.match(failed.errors[0].error, /^deadline exceeded/);
    await waitFor(() => outcome !== "pending", 10_000, "the transaction to end");
    assert.ok(outcome instanceof LeaseLostError, `LeaseLostError, got ${outcome}`);
    assert.deepEqual(await orders(), []);
    assert.equal(await followUps(client, job.id), 0);
    assert.equal((await client.getJob(job.id))!.state, "retryable", "the failure stands");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx.transaction (repeatable read, serializable): commits as read committed does", async () => {
  const { client, drop } = await testClient();
  const orders = await ordersTable(client);
  const { stop } = await startWorker(client, {
    handlers: {
      order: (job, ctx) =>
        ctx.transaction(async (tx) => {
          const [{ level }] = await tx.db.query<{ level: string }>(
            `select current_setting('transaction_isolation') as level`,
          );
          await tx.db.query(`insert into "${client.schema}".orders (n, job_id) values ($1, $2)`, [
            job.args.n,
            job.id,
          ]);
          await tx.enqueue("followup", { from: job.id });
          assert.equal(level, job.args.n === 1 ? "repeatable read" : "serializable");
          return { order: job.args.n };
        }, { isolation: job.args.n === 1 ? "repeatable read" : "serializable" }),
    },
  });
  try {
    const a = await client.enqueue("order", { n: 1 });
    const b = await client.enqueue("order", { n: 2 });
    for (const j of [a, b]) {
      const done = await finished(client, j.id);
      assert.equal(done.state, "completed", JSON.stringify(done.errors));
      assert.deepEqual(done.result, { order: j.args.n });
      assert.equal(await followUps(client, j.id), 1);
      assert.equal(await closures(client, done), 1);
    }
    assert.deepEqual(await orders(), [1, 2]);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("ctx.transaction: kill -9 between the handler's SQL and the commit leaves nothing; the job is rescued", async () => {
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const a = spawnWorker(schema);
  let b: ReturnType<typeof spawnWorker> | null = null;
  const followUpsOf = async (id: number) =>
    (await client.sql.unsafe(
      `select count(*)::int as n from ${
        allJobsSql(schema)
      } j where kind = 'tx_followup' and (args ->> 'from')::bigint = $1`,
      [id],
    ))[0].n;
  const effects = async () =>
    (await client.sql.unsafe(`select job_id, pid from "${schema}".effects`)).map((
      r,
    ) => [Number(r.job_id), r.pid]);
  try {
    await a.waitLine(/^started /);
    const job = await client.enqueue("tx_block", {});
    await a.waitLine(new RegExp(`^tx-sql ${job.id}$`));
    // Written inside the open transaction, not committed: invisible to everyone else.
    assert.deepEqual(await effects(), []);
    assert.equal(await followUpsOf(job.id), 0);
    await a.kill("SIGKILL");
    const killedPid = a.child.pid;
    // The server ends the dead connection's transaction: nothing of it ever commits.
    assert.equal((await client.getJob(job.id))!.state, "running", "not completed");
    assert.deepEqual(await effects(), []);
    assert.equal(await followUpsOf(job.id), 0);
    // Another process's leader rescues the attempt; that process runs it again and commits.
    b = spawnWorker(schema, { MODE: "b" });
    await b.waitLine(/^started /);
    const done = await waitFor(
      async () => {
        const j = (await client.getJob(job.id))!;
        return j.state === "completed" ? j : null;
      },
      40_000,
      "the job to be rescued and completed",
    ) as Job;
    assert.equal(done.attempt, 2, "the killed attempt was consumed by the rescue");
    assert.match(done.errors[0]?.error ?? "", /^rescued: heartbeat stale/);
    const rows = await effects();
    assert.equal(rows.length, 1, "one effect: the second attempt's");
    assert.notEqual(rows[0][1], killedPid);
    assert.deepEqual(done.result, { pid: rows[0][1] });
    assert.equal(await followUpsOf(job.id), 1, "one follow-up: the committed attempt's");
  } finally {
    await a.kill("SIGKILL");
    await b?.kill("SIGTERM");
    await drop();
  }
});

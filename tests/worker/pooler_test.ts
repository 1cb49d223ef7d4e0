/**
 * Through a real PgBouncer 1.18 in `pool_mode = transaction` (tests/helpers/pgbouncer.ts) in front of the
 * test server: producers, the migration and health through the pooled URL; worker processes whose only URL
 * is the pooled one (a 100-job drain by two, kill -9 of one, a leader that must be replaced, a mixed fleet
 * with a direct worker); a worker with the pooled URL and a direct LISTEN URL.
 */
import assert from "node:assert/strict";
import { createClient } from "../../src/client/client.ts";
import { createWorker, silentLogger } from "../../mod.ts";
import { resolvePooler } from "../../src/db/pooler.ts";
import { DATABASE_URL, dropSchema, freshSchema, TEST_ENGINE, testClient, waitFor } from "../helpers/db.ts";
import { type PgBouncer, startPgBouncer } from "../helpers/pgbouncer.ts";
import { type Proc, spawnWorker } from "../helpers/process.ts";
import { pendingCallback } from "../helpers/http.ts";

/** The pooler's log must show no server connection that a client lost (what ending pooled backends does). */
function assertCleanLog(bouncer: PgBouncer): void {
  assert.doesNotMatch(
    bouncer.log(),
    /when not linked|server conn crashed|closing because: server conn crashed/,
  );
}

Deno.test("pooler mode: the option, SERVICE_POOLER, then the URL's host or port, else none", () => {
  assert.deepEqual(resolvePooler("postgres://u@db:5432/x", "transaction"), {
    mode: "transaction",
    source: "option",
  });
  assert.equal(resolvePooler("postgres://u@db:6432/x", "none").mode, "none");
  assert.equal(resolvePooler("postgres://u@db:5432/x", undefined).mode, "none");
  assert.equal(resolvePooler("postgres://u@db:6432/x", undefined).mode, "transaction");
  assert.equal(
    resolvePooler("postgres://u@aws-0-eu-central-1.pooler.supabase.com:6543/postgres", undefined).mode,
    "transaction",
  );
  assert.equal(
    resolvePooler("postgres://u@aws-0-eu-central-1.pooler.supabase.com:5432/postgres", undefined).mode,
    "none",
    "Supavisor's session port",
  );
  assert.equal(
    resolvePooler("postgres://u@ep-cool-name-123456-pooler.eu-central-1.aws.neon.tech/db", undefined).mode,
    "transaction",
  );
  assert.equal(
    resolvePooler("postgres://u@my-proxy.proxy-abc123xyz.us-east-1.rds.amazonaws.com:5432/db", undefined)
      .mode,
    "transaction",
  );
  assert.throws(
    () => resolvePooler("postgres://u@db/x", "session" as never),
    /pooler must be "transaction" or "none"/,
  );
  assert.throws(
    () =>
      createWorker({
        databaseUrl: "postgres://u@db/x",
        listenUrl: "postgres://u@db:6432/x",
        queues: { q: {} },
      }),
    /listenUrl goes through port 6432 \(PgBouncer's\), where LISTEN does not work: give the database's direct URL/,
  );
  assert.throws(
    () => createWorker({ databaseUrl: "postgres://u@db/x", listenUrl: "http://db/x", queues: { q: {} } }),
    /listenUrl must be a postgres:\/\/ URL/,
  );
});

Deno.test("through PgBouncer (transaction mode): migrate, enqueue (concurrent, many, in a transaction, unique), cancel, retry, callbacks, the SQL API, health", async () => {
  const bouncer = await startPgBouncer({ poolSize: 4 });
  const schema = freshSchema("pool");
  const pooled = createClient({
    databaseUrl: bouncer.url,
    schema,
    pooler: "transaction",
    maxConnections: 12,
  });
  try {
    // The migration runs in one transaction: it works through the pooler.
    const m = await pooled.migrate({ engine: TEST_ENGINE });
    assert.ok(m.applied.length > 0);
    assert.deepEqual((await pooled.migrate()).applied, [], "idempotent through the pooler too");
    // 12 client connections over 4 server connections: statements of different clients interleave on one
    // server connection, which named prepared statements would not survive.
    const jobs = await Promise.all(
      Array.from({ length: 200 }, (_, i) => pooled.enqueue("k", { i }, { queue: i % 2 ? "a" : "b" })),
    );
    assert.equal(new Set(jobs.map((j) => j.id)).size, 200);
    const many = await pooled.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ kind: "m", args: { i } })));
    assert.equal(many.length, 50);
    // The caller's transaction: rolled back, nothing; committed, the job and the caller's row.
    await pooled.sql.unsafe(`create table "${schema}".orders (id int)`);
    await assert.rejects(
      pooled.transaction(async (tx) => {
        await tx.enqueue("rolled_back", {});
        throw new Error("no");
      }),
      /no/,
    );
    const inTx = await pooled.transaction(async (tx) => {
      await tx.sql.unsafe(`insert into "${schema}".orders values (1)`);
      return await tx.enqueue("committed", {});
    });
    assert.equal((await pooled.getJob(inTx.id))?.kind, "committed");
    assert.equal((await pooled.listJobs({ kind: "rolled_back" })).jobs.length, 0);
    const u1 = await pooled.enqueue("u", { x: 1 }, { unique: {} });
    const u2 = await pooled.enqueue("u", { x: 1 }, { unique: {} });
    assert.equal(u2.id, u1.id);
    assert.equal(u2.duplicate, true);
    assert.equal((await pooled.cancel(jobs[0].id)).state, "cancelled");
    assert.equal((await pooled.retry(jobs[0].id)).state, "available");
    // The SQL API, as any other driver or language would call it.
    const [viaSql] = await pooled.sql.unsafe(`select (${pooled.names.q}.enqueue('sql_kind', '{"a":1}')).id`);
    assert.ok((await pooled.getJob(Number(viaSql.id)))?.kind === "sql_kind");
    // An HTTP worker's callbacks: complete and heartbeat through the pooler.
    const { callbackId, job } = await pendingCallback(pooled);
    assert.equal(
      (await pooled.heartbeatExternal(callbackId, { timeoutSeconds: 60 })).state,
      "waiting_external",
    );
    assert.equal((await pooled.completeExternal(callbackId, { done: true })).state, "completed");
    assert.equal((await pooled.getJob(job.id))?.state, "completed");
    const h = await pooled.healthCheck();
    assert.equal(h.ready, true);
    assert.equal(h.pooler, "transaction");
    const direct = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 1 });
    assert.equal((await direct.healthCheck()).pooler, "none");
    await direct.close();
    assertCleanLog(bouncer);
  } finally {
    await pooled.close();
    await dropSchema(schema);
    await bouncer.stop();
  }
});

/** The number of processes that say they lead (their runtimes rows), and the term's holder. */
async function leaders(client: Awaited<ReturnType<typeof testClient>>["client"]): Promise<string | null> {
  const [r] = await client.sql.unsafe(`select holder from ${client.names.q}.leadership`);
  return r.holder;
}

Deno.test("two workers whose only URL is the pooled one: 100 jobs each run once, one leader, kill -9 of the leader, a mixed fleet", async () => {
  const bouncer = await startPgBouncer({ poolSize: 10 });
  const { client, drop, schema } = await testClient();
  await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
  const pooledEnv = {
    DATABASE_URL: bouncer.url,
    SERVICE_POOLER: "transaction",
    ELECTION_MS: "300",
    // Short enough to wait for, long enough that a loaded machine does not make a leader look stalled (at a
    // load average of 29 on 2 cores, 4 s through the 10 server connections let a renewal lapse once).
    LEADER_TTL_MS: "6000",
    RESCUE_MS: "3000",
  };
  const procs: Proc[] = [];
  // Every holder the term had, in order.
  const seen: string[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const h = await leaders(client);
      if (h !== null && seen.at(-1) !== h) seen.push(h);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  try {
    procs.push(spawnWorker(schema, pooledEnv), spawnWorker(schema, pooledEnv));
    const ids = (await Promise.all(procs.map((p) => p.waitLine(/^started /)))).map((l) => l.slice(8));
    const t0 = Date.now();
    const jobs = await client.enqueueMany(
      Array.from({ length: 100 }, (_, i) => ({ kind: "effect", args: { i } })),
    );
    await waitFor(
      async () => (await client.sql.unsafe(`select count(*)::int as n from "${schema}".effects`))[0].n >= 100,
      60_000,
      "100 effects",
    );
    console.log(`pooled drain: 100 jobs by two pooled workers in ${Date.now() - t0} ms`);
    const holder = await waitFor(() => leaders(client), 10_000, "a leader");
    assert.ok(ids.includes(holder!), "a pooled worker leads");
    // A scheduled job needs the leader's promotion through the pooler.
    const scheduled = await client.enqueue("effect", { s: 1 }, { runAt: new Date(Date.now() + 300) });
    await waitFor(
      async () => (await client.getJob(scheduled.id))?.state === "completed",
      15_000,
      "promotion",
    );
    // kill -9 of the leader: the other pooled worker takes the term after the TTL and promotes.
    assert.deepEqual(seen, [holder], "one leader until then");
    const li = ids.indexOf(holder!);
    await procs[li].kill("SIGKILL");
    const killedAt = Date.now();
    const next = await waitFor(
      async () => {
        const h = await leaders(client);
        return h && h !== holder ? h : null;
      },
      15_000,
      "a new leader",
    );
    assert.equal(next, ids[1 - li]);
    const took = Date.now() - killedAt;
    assert.ok(took < 6000 + 300 + 3000, `replaced after ${took} ms (TTL 6 s)`);
    const after = await client.enqueue("effect", { s: 2 }, { runAt: new Date(Date.now() + 300) });
    await waitFor(
      async () => (await client.getJob(after.id))?.state === "completed",
      15_000,
      "promotion after",
    );
    // A direct worker joins: the mixed fleet keeps the one term (the direct worker does not take it).
    procs.push(spawnWorker(schema, { ELECTION_MS: "300", LEADER_TTL_MS: "6000" }));
    await procs[2].waitLine(/^started /);
    await new Promise((r) => setTimeout(r, 2_500));
    assert.equal(await leaders(client), next, "the pooled leader keeps its term");
    // Every job ran exactly once.
    const [dups] = await client.sql.unsafe(
      `select count(*)::int as n from (select job_id from "${schema}".effects group by job_id having count(*) > 1) d`,
    );
    assert.equal(dups.n, 0, "no job ran twice");
    for (const j of jobs) assert.equal((await client.getJob(j.id))?.state, "completed");
    sampling = false;
    await sampler;
    assert.deepEqual(seen, [holder, next], "the term moved once");
    assertCleanLog(bouncer);
  } finally {
    sampling = false;
    await sampler;
    await Promise.all(procs.map((p) => p.kill("SIGKILL")));
    await drop();
    await bouncer.stop();
  }
});

Deno.test("a worker with the pooled URL polls; with a direct listenUrl it is woken at once; readiness says which", async () => {
  const bouncer = await startPgBouncer({ poolSize: 6 });
  const { client, drop, schema } = await testClient();
  const ran = new Map<number, number>();
  const logs: string[] = [];
  const logger = { ...silentLogger, info: (m: string) => logs.push(m) };
  const make = (listenUrl?: string) =>
    createWorker({
      databaseUrl: bouncer.url,
      pooler: "transaction",
      listenUrl,
      schema,
      maxConnections: 6,
      queues: { default: { maxWorkers: 2 } },
      // A long poll: a pickup much faster than it came from a wake-up.
      pollInterval: 5_000,
      heartbeatInterval: 500,
      logger,
      handlers: { k: (job) => void ran.set(job.id, Date.now()) },
    });
  const pickup = async (): Promise<number> => {
    // Let the claim loops go idle first.
    await new Promise((r) => setTimeout(r, 500));
    const t = Date.now();
    const j = await client.enqueue("k", {});
    await waitFor(() => ran.has(j.id), 10_000, "the job");
    return ran.get(j.id)! - t;
  };
  let w = make();
  try {
    await w.start();
    const r1 = await w.healthCheck();
    assert.equal(r1.pooler, "transaction");
    assert.equal(r1.listening, false);
    assert.ok(
      logs.some((l) =>
        /transaction pooler, where LISTEN does not work: the claim loops poll every 5000 ms/.test(l)
      ),
    );
    await pickup(); // polled: works, within a poll interval
    await w.shutdown(1000);
    w = make(DATABASE_URL);
    await w.start();
    const r2 = await w.healthCheck();
    assert.equal(r2.pooler, "transaction");
    assert.equal(r2.listening, true);
    assert.equal(r2.ready, true);
    // Three pickups, each far below the 5 s poll (by chance alone, all three would be rare).
    const ms = [await pickup(), await pickup(), await pickup()];
    assert.ok(
      ms.every((x) => x < 1_500),
      `woken by NOTIFY on the direct connection: ${ms.join(", ")} ms (poll 5 s)`,
    );
    assertCleanLog(bouncer);
  } finally {
    await w.shutdown(1000);
    await drop();
    await bouncer.stop();
  }
});

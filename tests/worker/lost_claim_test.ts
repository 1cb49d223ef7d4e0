/**
 * A server crash right after a claim (ADR 021). Claims commit durably, so the crash leaves the claimer's attempt
 * running on both engines and its completion stands. On queue storage a claim that was lost anyway (a server
 * run with `synchronous_commit = off`, or a failover to a standby that had not received it) is made again
 * with the same attempt and run lease; the first worker's outcome must then change nothing: it names its claim
 * id, and after recovery the claim ids move past every id given out before the crash.
 *
 * The crash: a throw-away cluster, and one of its backends killed with SIGKILL right after the claim, which
 * makes the server end every session and recover from the WAL written so far.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { type Client, createClient, createWorker, type Job, silentLogger, type Worker } from "../../mod.ts";
import { freshSchema, TEST_ENGINE, waitFor } from "../helpers/db.ts";
import { type PgCluster, startCluster } from "../helpers/pg_cluster.ts";
import { answers } from "../helpers/dev.ts";

/** A session of its own, whose backend the test kills. */
async function victim(url: string): Promise<{ pid: number; end: () => void }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const [r] = await sql`select pg_backend_pid() as pid`;
  return { pid: Number(r.pid), end: () => void sql.end({ timeout: 0 }).catch(() => {}) };
}

/** A promise and its resolver; `passed(what)` waits for it at most 60 s. */
function gate(): { wait: Promise<void>; open: () => void; passed: (what: string) => Promise<void> } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  const passed = (what: string) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 60_000);
    });
    return Promise.race([wait, late]).finally(() => clearTimeout(timer));
  };
  return { wait, open, passed };
}

interface Run {
  /** Whether the crash lost the first claim (its job was available again after recovery). */
  lost: boolean;
  finalResult: unknown;
  finalState: string;
  firstLease: number;
  secondLease?: number;
}

/**
 * Worker A claims one job and, as its handler starts, a backend is killed; after recovery worker B (started
 * only then) claims whatever is available. B's handler waits until A's handler has returned and A has shut
 * down (its completion written or refused); then B returns. Returns what became of the job.
 */
async function crashAfterClaim(pg: PgCluster): Promise<Run> {
  const schema = freshSchema("lostclaim");
  const clients: Client[] = [];
  const workers: Worker[] = [];
  const client = (): Client => {
    const c = createClient({ databaseUrl: pg.url, schema, maxConnections: 3, connectTimeout: 2 });
    clients.push(c);
    return c;
  };
  // A worker of one slot running `probe` jobs; no rescue during the test.
  const worker = (probe: (job: Job) => Promise<string>): Worker =>
    createWorker({
      client: client(),
      schema,
      queues: { default: { maxWorkers: 1 } },
      logger: silentLogger,
      engines: TEST_ENGINE === "canonical" ? ["canonical"] : undefined,
      heartbeatInterval: 500,
      rescueAfter: 60_000,
      pollInterval: 100,
      leaderElectionInterval: 200,
      handlers: { probe },
    });
  // A session of the test's own.
  const effects = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const admin = client();
    await admin.migrate({ engine: TEST_ENGINE });
    const [job] = await admin.enqueueMany([{ kind: "probe", args: {} }]);
    const killed = await victim(pg.url);
    // The job must outlive the crash whatever the server's settings: a checkpoint flushes the WAL.
    await effects.unsafe("checkpoint");
    const releaseA = gate();
    let firstLease = 0;
    const startedA = gate();
    const a = worker(async (j) => {
      firstLease = j.lease;
      // At once: a claim committed without the flush has its WAL still in the server's memory.
      Deno.kill(killed.pid, "SIGKILL");
      killed.end();
      startedA.open();
      await releaseA.wait;
      return "A";
    });
    workers.push(a);
    await a.start();
    await startedA.passed("worker A to start the job");
    await waitFor(() => answers(pg.url), 60_000, "the server to recover");
    const after = await waitFor(async () => await admin.getJob(job.id).catch(() => null), 30_000, "the job");
    const lost = after?.state === "available";
    if (!lost) {
      // The claim survived: A's attempt runs on; its completion is the job's.
      releaseA.open();
      await a.shutdown(10_000);
      const end = await admin.getJob(job.id);
      return { lost, firstLease, finalResult: end?.result, finalState: String(end?.state) };
    }
    const startedB = gate();
    const releaseB = gate();
    let secondLease = 0;
    const b = worker(async (j) => {
      secondLease = j.lease;
      startedB.open();
      await releaseB.wait;
      return "B";
    });
    workers.push(b);
    await b.start();
    await startedB.passed("worker B to start the job");
    // A returns while B runs the same attempt; its shutdown waits for its completion to be written or refused.
    releaseA.open();
    await a.shutdown(10_000);
    const between = await admin.getJob(job.id);
    assert.equal(between?.state, "running", "the first worker's completion did not end the attempt it lost");
    releaseB.open();
    const end = await waitFor(
      async () => {
        const j = await admin.getJob(job.id);
        return j?.state === "completed" ? j : null;
      },
      30_000,
      "the job to complete",
    );
    return { lost, firstLease, secondLease, finalResult: end?.result, finalState: String(end?.state) };
  } finally {
    await effects.end({ timeout: 1 }).catch(() => {});
    await Promise.all(workers.map((w) => w.shutdown(1_000).catch(() => {})));
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
  }
}

Deno.test("a server crash right after a claim: the claim survives on both engines and the claimer's completion stands", async () => {
  const pg = await startCluster();
  try {
    const run = await crashAfterClaim(pg);
    assert.equal(run.lost, false, "the claim committed durably");
    assert.equal(run.finalState, "completed");
    assert.equal(run.finalResult, "A");
  } finally {
    await pg.destroy();
  }
});

Deno.test({
  name:
    "queue storage: a claim lost in a server crash is made again with the same lease, and the first worker's outcome is refused",
  ignore: TEST_ENGINE !== "queue_storage",
  fn: async () => {
    // Commits without the WAL flush, and a WAL writer that sleeps 10 s: the claim's WAL stays in memory.
    const pg = await startCluster({ settings: { synchronous_commit: "off", wal_writer_delay: "10s" } });
    try {
      // A heartbeat or leader statement between the claim and the kill can still write the claim's WAL; a run
      // where the claim survived proves nothing here, so it is tried again (rarely needed).
      let run: Run | undefined;
      for (let i = 0; i < 4 && !run?.lost; i++) run = await crashAfterClaim(pg);
      assert.ok(run?.lost, "the crash lost the claim in one of four tries");
      assert.equal(run.secondLease, run.firstLease, "the claim made again has the same run lease");
      assert.equal(run.finalState, "completed");
      assert.equal(run.finalResult, "B", "the attempt ended with the outcome of the claim that exists");
    } finally {
      await pg.destroy();
    }
  },
});

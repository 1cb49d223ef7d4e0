/**
 * The concurrent-admin chaos case: admin changes beside each other and beside claims, through the admin
 * server's router (the code `svc serve` runs), on a throw-away cluster. Each round:
 *
 * 1. one `POST /api/jobs/bulk-cancel {}` beside single `POST /api/jobs/:id/cancel` requests (8 at a time)
 *    on the same queues' jobs;
 * 2. `POST /api/jobs/bulk-retry {"state": "failed"}` repeated while a worker claims the retried jobs (its
 *    handler fails them again for good).
 *
 * No answer may be a 500 (a deadlock, or any other internal error), and every job must end in a state the
 * requests could leave it in. Used by `tests/chaos/chaos_test.ts` (bounded) and `deno task chaos`.
 */
import { createClient, createWorker, silentLogger, TerminalError } from "../../mod.ts";
import { createAdminServer } from "../../src/http/server.ts";
import { type PgCluster, startCluster } from "../helpers/pg_cluster.ts";

export interface AdminChaosOptions {
  engine: "canonical" | "queue_storage";
  rounds: number;
  /** Jobs cancelled per round (and as many failed jobs retried). */
  jobs: number;
  log?: (line: string) => void;
}

export interface AdminChaosReport {
  engine: string;
  rounds: number;
  requests: number;
  /** Answers with status 500. */
  internal: number;
  /** Of those, the ones the server logged as a deadlock. */
  deadlocks: number;
  /** The first few 500 details the server logged. */
  samples: string[];
  /** Jobs left in a state the round could not leave them in (not cancelled after the cancels). */
  strays: number;
  wallMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runAdminChaos(o: AdminChaosOptions): Promise<AdminChaosReport> {
  const log = o.log ?? (() => {});
  const t0 = Date.now();
  const report: AdminChaosReport = {
    engine: o.engine,
    rounds: 0,
    requests: 0,
    internal: 0,
    deadlocks: 0,
    samples: [],
    strays: 0,
    wallMs: 0,
  };
  let pg: PgCluster | null = null;
  let client: ReturnType<typeof createClient> | null = null;
  let worker: ReturnType<typeof createWorker> | null = null;
  const errors: string[] = [];
  try {
    pg = await startCluster({ settings: { max_connections: 100 } });
    client = createClient({ databaseUrl: pg.url, schema: "admin_chaos", maxConnections: 12 });
    await client.migrate({ engine: o.engine });
    const app = createAdminServer(client, {
      callbackAuth: { kind: "unsigned" },
      logger: { info: () => {}, error: (l: string) => errors.push(l) },
    });
    const post = async (path: string, body?: unknown): Promise<number> => {
      report.requests++;
      const r = await app.fetch(
        new Request(`http://svc.test/api${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      );
      await r.body?.cancel();
      if (r.status === 500) report.internal++;
      return r.status;
    };
    /** How many of `ids` are not in `state` (both engines' tables). */
    const notIn = async (ids: number[], state: string): Promise<number> => {
      const [r] = await client!.sql.unsafe(
        `select count(*)::int as n from (select id, state::text from "${client!.schema}".jobs
                                          union all select id, state::text from "${client!.schema}_qs".jobs) j
          where j.id = any($1::bigint[]) and j.state <> $2`,
        [ids, state],
      );
      return r.n;
    };
    const queues = ["a", "b", "c"];
    worker = createWorker({
      client,
      schema: client.schema,
      queues: { retried: { maxWorkers: 10 } },
      logger: silentLogger,
      pollInterval: 50,
      heartbeatInterval: 500,
      maintenanceInterval: 100,
      leaderElectionInterval: 300,
      handlers: {
        boom: () => {
          throw new TerminalError("fails for good");
        },
      },
    });
    await worker.start();

    const allFailing: number[] = [];
    for (let round = 0; round < o.rounds; round++) {
      // 1. One bulk cancel beside single cancels, 8 at a time, on the same queues' jobs.
      const jobs = await client.enqueueMany(
        Array.from({ length: o.jobs }, (_, i) => ({ kind: "idle", queue: queues[i % queues.length] })),
      );
      const ids = jobs.map((j) => j.id);
      const bulk = post("/jobs/bulk-cancel", {});
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < ids.length) await post(`/jobs/${ids[next++]}/cancel`);
      }));
      await bulk;
      const notCancelled = await notIn(ids, "cancelled");
      report.strays += notCancelled;

      // 2. Bulk retries of failed jobs while the worker claims them (and fails them again).
      const failing = await client.enqueueMany(
        Array.from({ length: o.jobs }, () => ({ kind: "boom", queue: "retried", maxAttempts: 1 })),
      );
      const until = Date.now() + 30_000;
      const failingIds = failing.map((j) => j.id);
      const finished = async () => (await notIn(failingIds, "failed")) === 0;
      while (!(await finished()) && Date.now() < until) await sleep(100);
      for (let k = 0; k < 5; k++) {
        await post("/jobs/bulk-retry", { state: "failed", queue: "retried" });
        await sleep(50);
      }
      // Everything ends failed again (the worker claims what the retries made available). The retries are
      // queue-wide, so every round's jobs are retried again: wait while the number left keeps falling, and
      // count as left behind only what is still unfinished after 20 s without progress.
      allFailing.push(...failingIds);
      let left = Infinity;
      let progressAt = Date.now();
      for (;;) {
        const n = await notIn(allFailing, "failed");
        if (n === 0) break;
        if (n < left) {
          left = n;
          progressAt = Date.now();
        } else if (Date.now() - progressAt > 20_000) {
          report.strays += n;
          log(
            `admin chaos[${o.engine}]: round ${round + 1}: ${n} retried jobs did not end failed: ${
              JSON.stringify(
                await client!.sql.unsafe(
                  `select state, count(*)::int as n from (select id, state::text from "${client!.schema}".jobs
                    union all select id, state::text from "${client!.schema}_qs".jobs) j
                    where id = any($1::bigint[]) group by state`,
                  [allFailing],
                ),
              )
            }`,
          );
          break;
        }
        await sleep(200);
      }
      report.rounds++;
      log(
        `admin chaos[${o.engine}]: round ${round + 1}: ${report.internal} answers 500 so far; ` +
          `${notCancelled} of the cancelled jobs not cancelled`,
      );
    }
    report.deadlocks = errors.filter((l) => /deadlock detected/.test(l)).length;
    report.samples = errors.slice(0, 3).map((l) => l.split("\n")[0]);
    report.wallMs = Date.now() - t0;
    log(`admin chaos[${o.engine}]: ${JSON.stringify(report)}`);
    return report;
  } finally {
    await worker?.shutdown(1000).catch(() => {});
    await client?.close().catch(() => {});
    await pg?.destroy();
  }
}

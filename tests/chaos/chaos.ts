/**
 * A chaos run: worker processes on a throw-away PostgreSQL cluster drain jobs while they are killed
 * (SIGKILL, then started again), stopped and resumed (SIGSTOP/SIGCONT, leaders included), and while the
 * database restarts (fast and immediate). Afterwards, from the rows alone: every job completed (none lost),
 * no attempt ran twice (one effect per job and lease), and every completion was written by the job's last
 * attempt (no stale writer won). Used by `tests/chaos/chaos_test.ts` (bounded, in CI) and by
 * `deno task chaos` (`tests/chaos/run.ts`: 100,000 jobs, 10 minutes, figures in bench/results/).
 */
import postgres from "../../src/vendor/postgres/index.js";
import { createClient } from "../../mod.ts";
import { type PgCluster, startCluster } from "../helpers/pg_cluster.ts";
import { type Proc, spawnFixture } from "../helpers/process.ts";

/** What a run does. */
export interface ChaosOptions {
  engine: "canonical" | "queue_storage";
  /** Jobs in all: half enqueued before the workers start, half while faults happen. */
  jobs: number;
  /**
   * Jobs of kind `hostile` besides them (enqueued with the first half, 2 attempts each): each throws a
   * hostile value (tests/fixtures/chaos_worker.ts) and must end `failed` with readable errors.
   */
  hostile?: number;
  /** Worker processes. */
  workers: number;
  /** Faults are injected for this long (ms); then the run waits for the drain. */
  faultMs: number;
  /** One fault (a kill or a stop of a random running worker) every this many ms. */
  faultEveryMs: number;
  /** Database restarts, spread over the fault window. */
  pgRestarts: ("fast" | "immediate")[];
  /** How long a job takes (ms). */
  workMs?: number;
  seed: number;
  /** The run fails when jobs are still unfinished this long after it started (ms). */
  deadlineMs: number;
  log?: (line: string) => void;
}

/** What a run saw. */
export interface ChaosReport {
  engine: string;
  /** PostgreSQL's version. */
  server: string;
  jobs: number;
  completed: number;
  /** Jobs not completed at the end. */
  lost: number;
  /** Hostile jobs enqueued. */
  hostile: number;
  /** Hostile jobs not `failed` at the end, or with an error that is not a non-empty string. */
  hostileUnreadable: number;
  /** Hostile jobs by state at the end. */
  hostileStates: Record<string, number>;
  /** (job, lease) pairs that ran more than once. */
  duplicateAttempts: number;
  /** Completed jobs whose result came from another attempt than the job's last. */
  staleWinners: number;
  /** Completed jobs with no recorded run. */
  withoutRun: number;
  /** Jobs that ran more than once (a retry after a kill, a stop or the restart: allowed). */
  rerunJobs: number;
  /** Worker processes that exited without being killed by the run (an uncaught error, a refused start). */
  crashes: number;
  runs: number;
  kills: number;
  stops: number;
  restarts: number;
  wallMs: number;
}

/** A small deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retries `fn` while the database is away (a restart in progress), for up to a minute. */
async function patiently<T>(fn: () => Promise<T>): Promise<T> {
  const until = Date.now() + 60_000;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > until) throw e;
      await sleep(250);
    }
  }
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const log = o.log ?? (() => {});
  const random = rng(o.seed);
  const schema = "chaos";
  const t0 = Date.now();
  /** Set when the run ends: crashed workers are no longer replaced. */
  let done = false;
  let pg: PgCluster | null = null;
  const workers: (Proc | null)[] = [];
  const stopped = new Set<Proc>();
  /** Workers this run killed or is about to: their exit is no crash. */
  const killed = new Set<Proc>();
  let sql: postgres.Sql | null = null;
  let client: ReturnType<typeof createClient> | null = null;
  const report: ChaosReport = {
    engine: o.engine,
    server: "",
    jobs: o.jobs,
    completed: 0,
    lost: 0,
    hostile: o.hostile ?? 0,
    hostileUnreadable: 0,
    hostileStates: {},
    duplicateAttempts: 0,
    staleWinners: 0,
    withoutRun: 0,
    rerunJobs: 0,
    crashes: 0,
    runs: 0,
    kills: 0,
    stops: 0,
    restarts: 0,
    wallMs: 0,
  };
  try {
    pg = await startCluster({ settings: { max_connections: 300 } });
    client = createClient({ databaseUrl: pg.url, schema, maxConnections: 4, connectTimeout: 10 });
    await client.migrate({ engine: o.engine });
    sql = postgres(pg.url, { max: 2, onnotice: () => {}, connect_timeout: 5 });
    report.server = String((await sql.unsafe("show server_version"))[0].server_version);
    await sql.unsafe(
      `create table "${schema}".effects (job_id bigint not null, lease int not null, pid int not null)`,
    );
    const env = { DATABASE_URL: pg.url, WORK_MS: String(o.workMs ?? 5) };
    const spawn = (i: number) => {
      const w = spawnFixture("chaos_worker.ts", schema, env);
      workers[i] = w;
      w.status.then((s) => {
        if (killed.has(w)) return;
        report.crashes++;
        log(
          `chaos[${o.engine}]: worker ${i} exited on its own (code ${s.code}, signal ${s.signal}); starting another`,
        );
        if (!done) spawn(i);
      });
    };
    const enqueue = async (n: number) => {
      for (let done = 0; done < n;) {
        const k = Math.min(1000, n - done);
        await patiently(() => client!.enqueueMany(Array.from({ length: k }, () => ({ kind: "chaos" }))));
        done += k;
      }
    };
    const first = Math.ceil(o.jobs / 2);
    await enqueue(first);
    for (let i = 0; i < report.hostile; i += 1000) {
      const k = Math.min(1000, report.hostile - i);
      await client.enqueueMany(
        Array.from({ length: k }, (_, j) => ({ kind: "hostile", args: { v: i + j }, maxAttempts: 2 })),
      );
    }
    for (let i = 0; i < o.workers; i++) spawn(i);
    await Promise.all(workers.map((w) => w!.waitLine(/^started /, 60_000)));
    log(`chaos[${o.engine}]: ${o.workers} workers started, ${first} jobs queued`);

    // Faults, the second half of the jobs, and the restarts, all within the fault window.
    const faultEnd = Date.now() + o.faultMs;
    const producer = (async () => {
      const rest = o.jobs - first;
      const step = Math.max(1, Math.ceil(rest / Math.max(1, o.faultMs / 200)));
      for (let done = 0; done < rest; done += step) {
        await enqueue(Math.min(step, rest - done));
        await sleep(200);
      }
    })();
    const restarts = (async () => {
      for (let i = 0; i < o.pgRestarts.length; i++) {
        await sleep(Math.max(0, t0 + ((i + 1) * o.faultMs) / (o.pgRestarts.length + 1) - Date.now()));
        log(`chaos[${o.engine}]: PostgreSQL restart (${o.pgRestarts[i]})`);
        await pg!.stop(o.pgRestarts[i]);
        await sleep(1_000 + random() * 2_000);
        await pg!.start();
        report.restarts++;
      }
    })();
    while (Date.now() < faultEnd) {
      await sleep(o.faultEveryMs);
      const running = workers.map((w, i) => [w, i] as const).filter(([w]) => w && !stopped.has(w));
      if (running.length <= 1) continue; // never every worker down at once
      const [w, i] = running[Math.floor(random() * running.length)];
      if (random() < 0.5) {
        report.kills++;
        killed.add(w!);
        await w!.kill("SIGKILL");
        spawn(i);
      } else {
        try {
          w!.child.kill("SIGSTOP");
        } catch {
          continue; // it exited on its own just now: counted as a crash, and another starts in its place
        }
        report.stops++;
        stopped.add(w!);
        const ms = 1_000 + random() * 3_000;
        setTimeout(() => {
          try {
            w!.child.kill("SIGCONT");
          } catch { /* killed meanwhile */ }
          stopped.delete(w!);
        }, ms);
      }
    }
    await producer;
    await restarts;
    for (const w of stopped) w.child.kill("SIGCONT");
    stopped.clear();
    log(
      `chaos[${o.engine}]: faults over (${report.kills} kills, ${report.stops} stops, ${report.restarts} restarts)`,
    );

    // The drain.
    const all = `(select id, kind, state::text, result, lease, errors from "${schema}".jobs
                  union all select id, kind, state::text, result, lease, errors from "${schema}_qs".jobs)`;
    const jobs = `(select * from ${all} a where kind = 'chaos')`;
    // A hostile job is readable when it failed and each of its errors is a non-empty string.
    const unreadable = `select count(*)::int from ${all} h where h.kind = 'hostile' and (h.state <> 'failed'
                          or jsonb_array_length(h.errors) = 0
                          or exists (select 1 from jsonb_array_elements(h.errors) e
                                      where jsonb_typeof(e -> 'error') <> 'string' or e ->> 'error' = ''))`;
    for (;;) {
      const [r] = await patiently(() =>
        sql!.unsafe(
          `select (select count(*)::int from ${jobs} j where state = 'completed') as n, (${unreadable}) as bad`,
        )
      );
      report.completed = r.n;
      report.hostileUnreadable = r.bad;
      if ((r.n >= o.jobs && r.bad === 0) || Date.now() - t0 > o.deadlineMs) break;
      await sleep(500);
    }
    report.wallMs = Date.now() - t0;
    for (
      const r of await sql.unsafe(
        `select state, count(*)::int as n from ${all} h where kind = 'hostile' group by 1`,
      )
    ) {
      report.hostileStates[r.state] = r.n;
    }
    const [c] = await sql.unsafe(
      `with j as (select * from ${jobs} j),
            e as (select job_id, lease, count(*) as n from "${schema}".effects group by 1, 2)
       select (select count(*)::int from j where state <> 'completed') as lost,
              (select count(*)::int from e where n > 1) as dup,
              (select count(*)::int from j where state = 'completed' and (result ->> 'lease')::int <> lease) as stale,
              (select count(*)::int from j where state = 'completed'
                  and not exists (select 1 from e where e.job_id = j.id)) as norun,
              (select count(*)::int from (select job_id from e group by 1 having count(*) > 1) x) as rerun,
              (select coalesce(sum(n), 0)::int from e) as runs`,
    );
    report.lost = o.jobs - report.completed;
    report.duplicateAttempts = c.dup;
    report.staleWinners = c.stale;
    report.withoutRun = c.norun;
    report.rerunJobs = c.rerun;
    report.runs = c.runs;
    log(`chaos[${o.engine}]: ${JSON.stringify(report)}`);
    return report;
  } finally {
    done = true;
    for (const w of workers) if (w) killed.add(w);
    for (const w of workers) {
      try {
        w?.child.kill("SIGCONT");
      } catch { /* gone */ }
    }
    await Promise.all(workers.map((w) => w?.kill("SIGKILL").catch(() => {})));
    await sql?.end({ timeout: 1 }).catch(() => {});
    await client?.close().catch(() => {});
    await pg?.destroy();
  }
}

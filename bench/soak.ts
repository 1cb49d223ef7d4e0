/**
 * The held-xmin soak, on each storage engine in turn: one producer keeps a backlog of no-op jobs (the
 * workers run at saturation, not at a rate any engine keeps up with) and one svc worker drains it, for
 * `--minutes` per engine in three windows:
 *   before (the first 20 %): nothing else runs;
 *   held (20 % to 80 %, minutes 2 to 8 of 10): one session holds an idle REPEATABLE READ transaction that
 *     has read the job storage (canonical: the jobs table; queue storage: the ring's ready table, which
 *     also keeps its partitions from being truncated), so its snapshot holds back the xmin horizon;
 *   after (the last 20 %): the transaction has ended.
 * Queue storage rotates every 30 s (the completed retention is 60 s, so the retention does not lengthen
 * the rotation): a dozen prunes fall in a 6-minute held window, and their outcomes are counted. Every 10 s
 * it records completions per second, dead tuples of the job storage's tables (pg_class apart), the
 * backlog and the p99 of the claim statements. It runs on a throw-away cluster it starts itself, with
 * autovacuum on as in production (the shared development server has it off).
 *
 *   deno task bench --soak 10          10 minutes per engine (the default)
 *   deno run -A bench/soak.ts --minutes 2 --engines queue_storage,canonical --out FILE
 */
import postgres from "postgres";
import { startCluster } from "../tests/helpers/pg_cluster.ts";
import { createClient, createWorker, silentLogger } from "../mod.ts";
import { QueueStorageEngine } from "../src/storage/queue_storage/engine.ts";

const originalMaintainRing = QueueStorageEngine.prototype.maintainRing;

interface Args {
  minutes: number;
  /** The backlog the producer keeps (available jobs it enqueued that are not yet done). */
  backlog: number;
  engines: ("queue_storage" | "canonical")[];
  out?: string;
}

function parse(argv: string[]): Args {
  const get = (k: string) => {
    const i = argv.indexOf(`--${k}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  return {
    minutes: Number(get("minutes") ?? get("soak") ?? 10),
    backlog: Number(get("backlog") ?? 5_000),
    engines: (get("engines") ?? "queue_storage,canonical").split(",") as Args["engines"],
    out: get("out"),
  };
}

interface Sample {
  engine: string;
  phase: Phase;
  t: number;
  processed: number;
  rate: number;
  backlog: number;
  claimP99: number;
  deadJobs: number;
  deadPgClass: number;
  deadByTable: Record<string, number>;
  prunes: Record<string, number>;
}

type Phase = "before" | "held" | "after";
/** The held window: from 20 % to 80 % of an engine's run. */
const HELD_FROM = 0.2;
const HELD_TO = 0.8;
/** Queue storage's rotation in the soak, and the completed retention that keeps it at that. */
const ROTATION_MS = 30_000;
const COMPLETED_RETENTION_MS = 60_000;

function p99(xs: number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

async function soakEngine(
  url: string,
  engine: Args["engines"][number],
  a: Args,
  out: Sample[],
): Promise<void> {
  const admin = postgres(url, { max: 2, onnotice: () => {} });
  const client = createClient({ databaseUrl: url, maxConnections: 12 });
  await client.sql.unsafe(`drop schema if exists svc_qs cascade; drop schema if exists svc cascade`);
  await client.migrate({ engine, qsRotationIntervalMs: ROTATION_MS });
  const claimMs: number[] = [];
  const prunes: Record<string, number> = {};
  // Measure the engine's claim and ring upkeep where the worker calls them.
  const eng = client.engine as unknown as Record<string, (...x: unknown[]) => Promise<unknown>>;
  const claim = eng.claim.bind(client.engine);
  eng.claim = async (...x) => {
    const t = performance.now();
    try {
      return await claim(...x);
    } finally {
      claimMs.push(performance.now() - t);
    }
  };
  // The leader's ring upkeep runs on an engine of its own (its fenced connection): count the prune outcomes
  // of every queue-storage engine of this process.
  const proto = QueueStorageEngine.prototype;
  const ring = originalMaintainRing;
  proto.maintainRing = async function (this: QueueStorageEngine, ...x: Parameters<typeof ring>) {
    const r = await ring.apply(this, x);
    for (const o of Object.values(r.pruned)) prunes[o] = (prunes[o] ?? 0) + 1;
    return r;
  };
  let processed = 0;
  const worker = createWorker({
    client,
    queues: { default: { maxWorkers: 20 } },
    retention: { completed: COMPLETED_RETENTION_MS },
    handlers: {
      noop: () => {
        processed++;
      },
    },
    logger: silentLogger,
  });
  await worker.start();
  const runMs = a.minutes * 60_000;
  const t0 = performance.now();
  const jobTables = engine === "canonical" ? ["svc"] : ["svc", "svc_qs"];
  let stop = false;
  let produced = 0;
  // Saturation: top the backlog up in batches of 1,000 whenever it falls below the target.
  const producer = (async () => {
    while (!stop) {
      if (produced - processed < a.backlog) {
        await client.enqueueMany(Array.from({ length: 1_000 }, () => ({ kind: "noop" })));
        produced += 1_000;
      } else {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  })();
  const holder = postgres(url, { max: 1, onnotice: () => {} });
  let release = () => {};
  let held: Promise<unknown> | null = null;
  const holdSnapshot = async () => {
    const readTable = engine === "canonical" ? "svc.jobs" : "svc_qs.ready";
    let opened!: () => void;
    const isOpen = new Promise<void>((r) => opened = r);
    held = holder.begin("isolation level repeatable read", async (tx) => {
      await tx.unsafe(`select count(*) from ${readTable}`);
      opened();
      await new Promise<void>((r) => release = r);
    });
    await isOpen;
  };
  const phaseAt = (ms: number): Phase =>
    ms < runMs * HELD_FROM ? "before" : ms < runMs * HELD_TO ? "held" : "after";
  try {
    let last = 0;
    while (last < runMs) {
      const before = processed;
      const intervalStart = performance.now();
      claimMs.length = 0;
      for (const k of Object.keys(prunes)) delete prunes[k];
      // Sample every 10 s, and at the window's edges so that no interval straddles two windows.
      const edges = [runMs * HELD_FROM, runMs * HELD_TO, runMs].filter((e) => e > last);
      const until = Math.min(last + 10_000, edges[0]);
      await new Promise((r) => setTimeout(r, Math.max(0, t0 + until - performance.now())));
      const phase = phaseAt(last);
      last = until;
      if (phaseAt(last) === "held" && held === null) await holdSnapshot();
      if (phaseAt(last) === "after" && held !== null) {
        release();
        await held;
        held = Promise.resolve();
      }
      const stats = await admin.unsafe(
        `select schemaname || '.' || relname as rel, n_dead_tup::float8 as dead from pg_stat_user_tables
          where schemaname = any($1)
         union all select 'pg_catalog.pg_class', n_dead_tup::float8 from pg_stat_sys_tables
          where schemaname = 'pg_catalog' and relname = 'pg_class'`,
        [jobTables],
      );
      const byTable: Record<string, number> = {};
      for (const r of stats) if (Number(r.dead) > 0) byTable[r.rel] = Number(r.dead);
      const s: Sample = {
        engine,
        phase,
        t: Math.round(last / 1000),
        processed,
        rate: (processed - before) / ((performance.now() - intervalStart) / 1000),
        backlog: produced - processed,
        claimP99: p99(claimMs),
        deadJobs: Object.entries(byTable).filter(([k]) => k !== "pg_catalog.pg_class").reduce(
          (x, [, v]) => x + v,
          0,
        ),
        deadPgClass: byTable["pg_catalog.pg_class"] ?? 0,
        deadByTable: byTable,
        prunes: { ...prunes },
      };
      out.push(s);
      console.log(
        `soak ${engine} [${phase}] t=${s.t}s processed=${s.processed} rate=${s.rate.toFixed(0)}/s ` +
          `backlog=${s.backlog} claim p99=${s.claimP99.toFixed(1)} ms dead (job tables)=${s.deadJobs} ` +
          `pg_class dead=${s.deadPgClass} prunes=${JSON.stringify(s.prunes)}`,
      );
    }
  } finally {
    release();
    await held;
    stop = true;
    await producer;
    await worker.shutdown(5_000);
    await holder.end({ timeout: 1 });
    await client.close();
    await admin.end({ timeout: 1 });
  }
}

function report(a: Args, samples: Sample[], server: string): string {
  const lines = [
    `# Held-xmin soak (${a.minutes} min per engine, at saturation)`,
    "",
    `Produced by \`deno task bench --soak ${a.minutes}\` on ${new Date().toISOString()}, on a throw-away ` +
    `${server} cluster (default settings otherwise). One worker (maxWorkers 20, no-op handler, ` +
    `completed retention ${COMPLETED_RETENTION_MS / 1000} s); one producer in the same process keeps about ` +
    `${a.backlog.toLocaleString("en-US")} jobs waiting (batches of 1,000), so the rate is what the engine ` +
    `drains. Windows: before (first ${
      HELD_FROM * 100
    } %), held (an idle REPEATABLE READ transaction that has ` +
    `read the job storage holds its snapshot, ${HELD_FROM * 100} % to ${HELD_TO * 100} %), after. Queue ` +
    `storage rotates every ${ROTATION_MS / 1000} s. Dead tuples are \`n_dead_tup\` summed over the job ` +
    "storage's tables (pg_class apart), sampled at the end of each interval; claim p99 over the claim " +
    "statements of the interval; prune outcomes per ring slot looked at in the interval.",
    "",
  ];
  for (const engine of a.engines) {
    const mine = samples.filter((x) => x.engine === engine);
    if (!mine.length) continue;
    lines.push(`## ${engine}`, "");
    const mean = (phase: string) => {
      const ps = mine.filter((x) => x.phase === phase);
      return ps.length ? ps.reduce((x, s) => x + s.rate, 0) / ps.length : NaN;
    };
    const before = mean("before");
    const held = mine.filter((x) => x.phase === "held");
    const heldRate = mean("held");
    const lastBefore = mine.filter((x) => x.phase === "before").at(-1);
    const deadStart = lastBefore?.deadJobs ?? 0;
    const deadEnd = held.at(-1)?.deadJobs ?? 0;
    const jobsHeld = (held.at(-1)?.processed ?? 0) - (lastBefore?.processed ?? 0);
    const outcomes: Record<string, number> = {};
    for (const s of held) for (const [k, v] of Object.entries(s.prunes)) outcomes[k] = (outcomes[k] ?? 0) + v;
    lines.push(
      `- completed per second: before ${before.toFixed(0)}, held ${heldRate.toFixed(0)} ` +
        `(${((heldRate / before - 1) * 100).toFixed(1)} %), after ${mean("after").toFixed(0)}`,
      `- dead tuples in the job tables: ${deadStart} when the snapshot was taken, ${deadEnd} when it was ` +
        `released (${((deadEnd - deadStart) / Math.max(1, jobsHeld / 1000)).toFixed(2)} per 1,000 jobs ` +
        `completed in the held window, ${jobsHeld.toLocaleString("en-US")} jobs)`,
      `- prune outcomes in the held window: ${
        Object.entries(outcomes).map(([k, v]) => `${k} ${v}`).join(", ") || "none"
      }`,
      `- worst claim p99: before ${worst(mine, "before")} ms, held ${worst(mine, "held")} ms, after ${
        worst(mine, "after")
      } ms`,
      "",
    );
    lines.push(
      "| t (s) | window | processed | completed/s | backlog | claim p99 ms | dead tuples (job tables) | dead pg_class | prunes |",
    );
    lines.push("|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for (const s of mine) {
      lines.push(
        `| ${s.t} | ${s.phase} | ${s.processed} | ${s.rate.toFixed(0)} | ${s.backlog} | ${
          s.claimP99.toFixed(1)
        } | ` +
          `${s.deadJobs} | ${s.deadPgClass} | ${
            Object.entries(s.prunes).map(([k, v]) => `${k} ${v}`).join(", ") || "—"
          } |`,
      );
    }
    lines.push("");
  }
  return lines.join("\n");
}

function worst(samples: Sample[], phase: string): string {
  const ps = samples.filter((s) => s.phase === phase);
  return ps.length ? Math.max(...ps.map((s) => s.claimP99)).toFixed(1) : "—";
}

if (import.meta.main) {
  const a = parse(Deno.args);
  const cluster = await startCluster();
  const samples: Sample[] = [];
  let server = "PostgreSQL";
  try {
    const sql = postgres(cluster.url, { max: 1, onnotice: () => {} });
    const [v] = await sql`show server_version`;
    const [av] = await sql`show autovacuum`;
    server = `PostgreSQL ${String(v.server_version).split(" ")[0]} (autovacuum ${av.autovacuum})`;
    await sql.end();
    console.log(`soak: ${server} at ${cluster.url}; ${a.minutes} min per engine; backlog ${a.backlog}`);
    for (const engine of a.engines) await soakEngine(cluster.url, engine, a, samples);
  } finally {
    await cluster.destroy();
  }
  const md = report(a, samples, server);
  const out = a.out ??
    new URL(`./results/${new Date().toISOString().slice(0, 10)}-soak.md`, import.meta.url).pathname;
  await Deno.writeTextFile(out, md);
  console.log(`written: ${out}`);
}

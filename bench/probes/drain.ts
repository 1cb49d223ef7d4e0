/** Probe: drain N no-op jobs at concurrency C (args: N C [0 = retention 0]; env CL = claimers, SQLFILL=1 queues the jobs with one INSERT, ALLOC=1 runs the drain under V8's sampling heap profiler and prints the bytes allocated per job by allocating function) in a throw-away database bench_probe_drain; prints jobs/s, the machine's busy and idle CPU-seconds (/proc/stat) and the Deno process's CPU-seconds over the drain. */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
import process from "node:process";
import { Session } from "node:inspector";
const N = Number(Deno.args[0] ?? 20000), C = Number(Deno.args[1] ?? 10), RET = Deno.args[2] === "0";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_drain");
await admin.unsafe("create database bench_probe_drain");
const url = "postgres://postgres@127.0.0.1:5432/bench_probe_drain";
const client = createClient({ databaseUrl: url, maxConnections: C > 10 ? 20 : 10 });
await client.migrate({
  engine: (Deno.env.get("ENGINE") ?? "queue_storage") as "canonical" | "queue_storage",
});
if (Deno.env.get("SQLFILL")) {
  const s2 = postgres(url, { max: 1 });
  await s2.unsafe(`insert into svc.jobs (kind) select 'noop' from generate_series(1, ${N})`);
  await s2.end();
} else {for (let i = 0; i < N; i += 1000) {
    await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
  }}
const sys = () => {
  const l = Deno.readTextFileSync("/proc/stat").split("\n")[0].split(/\s+/).slice(1).map(Number);
  return { busy: l[0] + l[1] + l[2] + l[5] + l[6], idle: l[3] + l[4] };
};
let done = 0;
let t1 = 0;
let resolve!: () => void;
const all = new Promise<void>((r) => resolve = r);
const commits = async () =>
  Number(
    (await admin.unsafe(
      `select xact_commit from pg_stat_database where datname = 'bench_probe_drain'`,
    ))[0].xact_commit,
  );
const x0 = await commits();
const s0 = sys();
const c0 = process.cpuUsage();
const t0 = performance.now();
const w = createWorker({
  client,
  queues: {
    default: {
      maxWorkers: C,
      claimers: Number(Deno.env.get("CL") ?? 1),
      prefetch: Number(Deno.env.get("PREFETCH") ?? 0),
    },
  },
  logger: silentLogger,
  retention: RET ? { completed: 0 } : undefined,
  handlers: { noop: () => null },
  on: {
    completed: () => {
      if (++done === N) {
        t1 = performance.now();
        resolve();
      }
    },
  },
});
const alloc = Deno.env.get("ALLOC") ? await startAllocationSampling() : null;
await w.start();
await all;
if (alloc) await alloc();
const s1 = sys();
const c1 = process.cpuUsage(c0);
const wall = (t1 - t0) / 1000;
await w.shutdown(1000);
await client.close();
// The worker's backends have exited, so their statistics are in pg_stat_database (the shutdown's few commits count).
await new Promise((r) => setTimeout(r, 500));
const x1 = await commits();
console.log(
  `drain ${N} c${C}${RET ? " ret0" : ""}: ${(N / wall).toFixed(0)} jobs/s; wall ${
    wall.toFixed(2)
  }s; machine busy ${((s1.busy - s0.busy) / 100).toFixed(2)} cpu-s idle ${
    ((s1.idle - s0.idle) / 100).toFixed(2)
  }; deno ${((c1.user + c1.system) / 1e6).toFixed(2)} cpu-s; ${
    ((x1 - x0) / N).toFixed(3)
  } commits/job (all sessions)`,
);
await admin.unsafe("drop database bench_probe_drain");
await admin.end();

/** Starts V8's sampling heap profiler (objects later collected included); the stop prints bytes per job by function. */
async function startAllocationSampling(): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  const post = (m: string, p: Record<string, unknown> = {}) =>
    new Promise((res, rej) => session.post(m, p, (e: unknown, r: unknown) => e ? rej(e) : res(r)));
  await post("HeapProfiler.enable");
  await post("HeapProfiler.startSampling", {
    samplingInterval: 8192,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  type Node = {
    callFrame: { functionName: string; url: string; lineNumber: number };
    selfSize: number;
    children: Node[];
  };
  return async () => {
    const { profile } = await post("HeapProfiler.stopSampling") as { profile: { head: Node } };
    const by = new Map<string, number>();
    let total = 0;
    const walk = (n: Node) => {
      const f = n.callFrame;
      const k = `${f.functionName || "(anon)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber}`;
      by.set(k, (by.get(k) ?? 0) + n.selfSize);
      total += n.selfSize;
      n.children.forEach(walk);
    };
    walk(profile.head);
    console.log(
      `allocated (sampled) ${(total / 1e6).toFixed(1)} MB, ${(total / N).toFixed(0)} bytes/job; by function:`,
    );
    [...by].sort((a, b) => b[1] - a[1]).slice(0, 40).forEach(([k, v]) =>
      console.log(`${(v / N).toFixed(0).padStart(6)} B/job ${k}`)
    );
    session.disconnect();
  };
}

/**
 * What the benchmark runs: the counts of each mode, and the systems. A system is named
 * `base[:defaults][@node]`: `base` is an adapter in bench/systems/, `:defaults` runs it at its own
 * defaults (except concurrency; only the windowed drain), `@node` runs it under Node 22 (bench/node.ts)
 * instead of Deno's Node compatibility.
 */

export interface Counts {
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
  /** Windowed drain (systems at their defaults): jobs queued, and the window in ms. */
  windowJobs: number;
  windowMs: number;
  /** Whether svc also drains under each fleet-wide limit (LIMIT_VARIANTS). */
  limits: boolean;
}

export const COUNTS: Record<"full" | "quick", Counts> = {
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
    windowJobs: 2000,
    windowMs: 30_000,
    limits: true,
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
    windowJobs: 500,
    windowMs: 10_000,
    limits: false,
  },
};

/** Every system, in the order runs take them. */
export const SYSTEMS = [
  "svc",
  "svc_prefetch",
  "svc_canonical",
  "pgboss",
  "graphile_worker",
  "pgboss@node",
  "graphile_worker@node",
  "svc@node",
  "svc_prefetch@node",
  "svc:defaults",
  "pgboss:defaults",
  "graphile_worker:defaults",
  "pgboss:defaults@node",
  "graphile_worker:defaults@node",
] as const;

/** Quick mode's systems (CI: under 2 minutes, no Node download). */
export const QUICK_SYSTEMS = ["svc", "svc_canonical", "pgboss", "graphile_worker"];

const BASE_LABELS: Record<string, string> = {
  svc: "svc",
  svc_prefetch: "svc, prefetch 500",
  svc_canonical: "svc (canonical)",
  pgboss: "pg-boss",
  graphile_worker: "graphile-worker",
};

export interface SystemSpec {
  /** The full name, as in SYSTEMS. */
  name: string;
  /** The adapter (bench/systems/<base>.ts). */
  base: string;
  defaults: boolean;
  node: boolean;
}

export function parseSystem(name: string): SystemSpec {
  const node = name.endsWith("@node");
  const rest = node ? name.slice(0, -"@node".length) : name;
  const defaults = rest.endsWith(":defaults");
  return { name, base: defaults ? rest.slice(0, -":defaults".length) : rest, defaults, node };
}

/** "pg-boss, defaults, Node 22" and the like. */
export function label(name: string): string {
  const s = parseSystem(name);
  return (BASE_LABELS[s.base] ?? s.base) + (s.defaults ? ", defaults" : "") + (s.node ? " (Node 22)" : "");
}

export function fmtRate(v: number): string {
  return Math.round(v).toLocaleString("en");
}

/**
 * A throw-away preview server for working on the UI without PostgreSQL: serves ui/dist and a
 * fake, in-memory admin API with the shapes of docs/reference/rest.md, and moves some jobs along
 * every second so live updates can be seen. Not used by `svc serve`.
 *
 *   deno run -A ui/build.ts && deno run -A ui/dev/preview.ts [--port 8788] [--read-only] [--fail /api/stats]
 *
 * `--fail PATH` makes GET PATH answer 500 `internal`, to look at the error banner.
 */
import { loadUiAssets, uiFileFor } from "../assets.ts";
import { JOB_STATES, type JobState, TERMINAL_STATES } from "../../src/types.ts";
import type { Job } from "../api.ts";

type State = JobState;
const STATES: readonly State[] = JOB_STATES;
const TERMINAL: readonly State[] = TERMINAL_STATES;

/** A job as the admin API returns it (ui/api.ts). */
type FakeJob = Job;

const args = Deno.args;
const flag = (name: string) => args.includes(name);
const option = (name: string, fallback: string) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : fallback;
};
const PORT = Number(option("--port", "8788"));
const READ_ONLY = flag("--read-only");
const FAIL = option("--fail", "");

// Deterministic pseudo-random numbers, so every start shows the same data.
let seed = 42;
function rand(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
const iso = (ms: number) => new Date(ms).toISOString();
const uuid = () =>
  "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (c) => {
    const r = Math.floor(rand() * 16);
    return (c === "x" ? r : (r & 0x3) | 0x8).toString(16);
  });

const QUEUES = ["default", "emails", "reports", "webhooks", "billing"];
const paused = new Set<string>(["billing"]);
const KINDS: Record<string, string> = {
  send_email: "emails",
  generate_report: "reports",
  deliver_webhook: "webhooks",
  charge_card: "billing",
  resize_image: "default",
  sync_crm: "default",
};
const TAGS = ["urgent", "batch", "customer:acme", "beta", "nightly"];
const ERRORS = [
  "connect ECONNREFUSED 10.0.3.17:587",
  "HTTP 502 from https://hooks.example.com/orders: Bad Gateway",
  "TypeError: Cannot read properties of undefined (reading 'email')\n    at sendEmail (handlers/email.ts:41:17)\n    at runJob (worker.ts:120:9)",
  "card_declined: insufficient funds",
  "callback timed out",
  "statement timeout: canceling statement due to statement timeout",
];
const HOSTS = ["web-1", "worker-a", "worker-b", "worker-c"];

function argsFor(kind: string, id: number): Record<string, unknown> {
  switch (kind) {
    case "send_email":
      return { to: `user${id}@example.com`, template: pick(["welcome", "receipt", "reset_password"]) };
    case "generate_report":
      return { report: pick(["monthly_revenue", "churn", "usage"]), month: "2026-10" };
    case "deliver_webhook":
      return { url: "https://hooks.example.com/orders", event: "order.paid", order_id: 10_000 + id };
    case "charge_card":
      return { customer: `cus_${(id * 7919).toString(36)}`, amount_cents: 1000 + id * 3, currency: "EUR" };
    case "resize_image":
      return { key: `uploads/${id}.png`, sizes: [64, 256, 1024] };
    default:
      return { account: `acct_${id}`, full: rand() < 0.2 };
  }
}

const start = Date.now();
const jobs = new Map<number, FakeJob>();
const callbacks = new Map<
  number,
  {
    id: string;
    attempt: number;
    state: string;
    deadline_at: string | null;
    created_at: string;
    resolved_at: string | null;
  }[]
>();
let nextId = 1;

function makeJob(state: State, createdAt: number, kind = pick(Object.keys(KINDS))): FakeJob {
  const id = nextId++;
  const max = pick([3, 5, 25]);
  const job: FakeJob = {
    id,
    kind,
    queue: KINDS[kind],
    args: argsFor(kind, id),
    state,
    priority: pick([1, 2, 2, 2, 3, 4]),
    attempt: 0,
    max_attempts: max,
    run_at: iso(createdAt),
    created_at: iso(createdAt),
    attempted_at: null,
    finalized_at: null,
    heartbeat_at: null,
    deadline_at: null,
    errors: [],
    tags: rand() < 0.5
      ? [pick(TAGS)]
      : rand() < 0.3
      ? [pick(TAGS), pick(TAGS)].filter((t, i, a) => a.indexOf(t) === i)
      : [],
    metadata: rand() < 0.3 ? { request_id: uuid().slice(0, 8) } : {},
    result: null,
    unique_key: rand() < 0.1 ? `${kind}:${id % 13}` : null,
    callback_id: null,
    callback_timeout_at: null,
    attempted_by: null,
    effective_max_attempts: null,
    lease: 0,
  };
  const runtime = `${pick(HOSTS)}:${1000 + Math.floor(rand() * 9000)}:${uuid().slice(0, 4)}`;
  const attempted = createdAt + 2000 + rand() * 30_000;
  if (state === "scheduled") job.run_at = iso(Date.now() + 60_000 + rand() * 3_600_000);
  if (state !== "scheduled" && state !== "available") {
    job.attempt = state === "failed" ? max : 1 + Math.floor(rand() * Math.min(3, max));
    job.attempted_at = iso(attempted);
    job.attempted_by = runtime;
  }
  if (state === "running") {
    job.heartbeat_at = iso(Date.now() - rand() * 20_000);
    job.deadline_at = iso(Date.now() + 300_000);
  }
  if (state === "retryable" || state === "failed") {
    for (let a = 1; a <= job.attempt; a++) {
      job.errors.push({
        attempt: a,
        at: iso(attempted + a * 4000),
        error: pick(ERRORS),
        terminal: state === "failed" && a === job.attempt && rand() < 0.3,
      });
    }
    if (state === "retryable") job.run_at = iso(Date.now() + 5000 + rand() * 120_000);
  }
  if (TERMINAL.includes(state)) job.finalized_at = iso(attempted + 1500 + rand() * 5000);
  if (state === "completed") {
    job.result = rand() < 0.5 ? { ok: true, took_ms: Math.floor(rand() * 900) } : null;
  }
  if (state === "waiting_external") {
    job.callback_id = uuid();
    job.callback_timeout_at = iso(Date.now() + 600_000 + rand() * 3_000_000);
    callbacks.set(id, [{
      id: job.callback_id,
      attempt: job.attempt,
      state: "pending",
      deadline_at: job.callback_timeout_at,
      created_at: job.attempted_at!,
      resolved_at: null,
    }]);
  }
  if (state === "retryable" && job.errors.at(-1)?.error === "callback timed out") {
    callbacks.set(id, [{
      id: uuid(),
      attempt: job.attempt,
      state: "timed_out",
      deadline_at: iso(attempted + 3000),
      created_at: iso(attempted),
      resolved_at: iso(attempted + 3000),
    }]);
  }
  jobs.set(id, job);
  return job;
}

const WEIGHTS: [State, number][] = [
  ["completed", 55],
  ["failed", 9],
  ["available", 10],
  ["running", 6],
  ["scheduled", 6],
  ["retryable", 6],
  ["waiting_external", 4],
  ["cancelled", 4],
];
function weightedState(): State {
  let r = rand() * 100;
  for (const [s, w] of WEIGHTS) if ((r -= w) < 0) return s;
  return "completed";
}
for (let i = 0; i < 420; i++) makeJob(weightedState(), start - (420 - i) * 25_000);

// Throughput per minute for the last hour (plus what the simulation adds).
const throughput = new Map<number, { completed: number; failed: number }>();
const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;
for (let m = 0; m < 60; m++) {
  const t = minuteOf(start) - (59 - m) * 60_000;
  const wave = 20 + 14 * Math.sin(m / 6) + rand() * 10;
  throughput.set(t, { completed: Math.round(wave), failed: rand() < 0.35 ? Math.floor(rand() * 6) : 0 });
}
function count(state: State | "completed_now" | "failed_now") {
  const m = minuteOf(Date.now());
  const e = throughput.get(m) ?? { completed: 0, failed: 0 };
  if (state === "completed_now") e.completed++;
  if (state === "failed_now") e.failed++;
  throughput.set(m, e);
}

const cron = [
  {
    name: "nightly-report",
    schedule: "0 2 * * *",
    kind: "generate_report",
    args: { report: "usage" },
    queue: "reports",
    timezone: "Europe/Berlin",
    paused: false,
    last_fire_at: iso(start - 20 * 3_600_000),
    next_fire_at: iso(start + 4 * 3_600_000),
  },
  {
    name: "sync-crm",
    schedule: "*/15 * * * *",
    kind: "sync_crm",
    args: { full: false },
    queue: "default",
    timezone: "UTC",
    paused: false,
    last_fire_at: iso(start - 6 * 60_000),
    next_fire_at: iso(start + 9 * 60_000),
  },
  {
    name: "purge-uploads",
    schedule: "30 3 * * 0",
    kind: "resize_image",
    args: { purge: true },
    queue: "default",
    timezone: "UTC",
    paused: true,
    last_fire_at: null,
    next_fire_at: null,
  },
  {
    name: "dunning",
    schedule: "0 9 * * 1-5",
    kind: "charge_card",
    args: { retry_declined: true },
    queue: "billing",
    timezone: "America/New_York",
    paused: false,
    last_fire_at: iso(start - 30 * 3_600_000),
    next_fire_at: iso(start + 18 * 3_600_000),
  },
];

const runtimes = [
  {
    id: "worker-a:4211:9f2c",
    hostname: "worker-a",
    pid: 4211,
    queues: ["default", "emails"],
    ready: true,
    leader: true,
    started_at: iso(start - 86_400_000),
    heartbeat_at: iso(start),
    live: true,
  },
  {
    id: "worker-b:3907:11ab",
    hostname: "worker-b",
    pid: 3907,
    queues: ["reports", "webhooks"],
    ready: true,
    leader: false,
    started_at: iso(start - 7_200_000),
    heartbeat_at: iso(start),
    live: true,
  },
  {
    id: "worker-c:5120:77de",
    hostname: "worker-c",
    pid: 5120,
    queues: ["billing"],
    ready: false,
    leader: false,
    started_at: iso(start - 600_000),
    heartbeat_at: iso(start),
    live: true,
  },
  {
    id: "worker-d:2210:03aa",
    hostname: "worker-d",
    pid: 2210,
    queues: ["default"],
    ready: true,
    leader: false,
    started_at: iso(start - 172_800_000),
    heartbeat_at: iso(start - 400_000),
    live: false,
  },
];

// Every second: some available jobs start, some running ones finish, new ones arrive.
setInterval(() => {
  const now = Date.now();
  for (const r of runtimes) if (r.live) r.heartbeat_at = iso(now);
  for (const j of jobs.values()) {
    if (j.state === "available" && !paused.has(j.queue) && rand() < 0.08) {
      j.state = "running";
      j.attempt++;
      j.attempted_at = iso(now);
      j.heartbeat_at = iso(now);
      j.attempted_by = runtimes[0].id;
    } else if (j.state === "running" && rand() < 0.1) {
      if (rand() < 0.85) {
        j.state = "completed";
        j.result = { ok: true };
        count("completed_now");
      } else {
        j.errors.push({ attempt: j.attempt, at: iso(now), error: pick(ERRORS) });
        j.state = j.attempt >= j.max_attempts ? "failed" : "retryable";
        if (j.state === "failed") count("failed_now");
        j.run_at = iso(now + 30_000);
      }
      if (TERMINAL.includes(j.state)) j.finalized_at = iso(now);
    } else if ((j.state === "retryable" || j.state === "scheduled") && Date.parse(j.run_at) <= now) {
      j.state = "available";
    }
  }
  if (rand() < 0.5) makeJob("available", now);
}, 1000);

function countsOf(list: FakeJob[]): Record<State, number> {
  const c = Object.fromEntries(STATES.map((s) => [s, 0])) as Record<State, number>;
  for (const j of list) c[j.state]++;
  return c;
}
function queueInfo(name: string) {
  const list = [...jobs.values()].filter((j) => j.queue === name);
  const avail = list.filter((j) => j.state === "available").map((j) => Date.parse(j.run_at));
  return {
    name,
    paused: paused.has(name),
    counts: countsOf(list),
    oldest_available_age_seconds: avail.length ? Math.round((Date.now() - Math.min(...avail)) / 1000) : null,
  };
}

/** Made-up per-minute samples of the last hour: depth per queue, attempts per (queue, kind). */
function samples(q: URLSearchParams) {
  const out: Record<string, unknown>[] = [];
  const queue = q.get("queue");
  const kind = q.get("kind");
  for (let m = 60; m >= 1; m--) {
    const minute = iso(minuteOf(Date.now()) - m * 60_000);
    const wave = 1 + Math.sin(m / 7);
    if (!kind) {
      for (const name of QUEUES) {
        if (queue && name !== queue) continue;
        out.push({ minute, queue: name, kind: null, depth: Math.round(wave * (3 + name.length)) });
      }
    }
    for (const [k, name] of Object.entries(KINDS)) {
      if ((queue && name !== queue) || (kind && k !== kind)) continue;
      const completed = Math.round(wave * (2 + k.length / 2));
      out.push({
        minute,
        queue: name,
        kind: k,
        depth: null,
        completed,
        failed: m % 9 === 0 ? 1 : 0,
        retried: m % 5 === 0 ? 2 : 0,
        run_p50_ms: 100 + k.length * 20,
        run_p95_ms: 900 + k.length * 80,
      });
    }
  }
  return out;
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "access-control-allow-origin": "*" },
  });
const fail = (status: number, code: string, error: string) => json({ error, code }, status);

function listJobs(q: URLSearchParams) {
  let list = [...jobs.values()].sort((a, b) => b.id - a.id);
  const state = q.get("state");
  if (state) list = list.filter((j) => j.state === state);
  for (const k of ["kind", "queue"] as const) {
    const v = q.get(k);
    if (v) list = list.filter((j) => j[k] === v);
  }
  const tag = q.get("tag");
  if (tag) list = list.filter((j) => j.tags.includes(tag));
  const text = q.get("q")?.toLowerCase();
  if (text) list = list.filter((j) => JSON.stringify(j.args).toLowerCase().includes(text));
  const cursor = q.get("cursor");
  if (cursor) {
    const after = Number(atob(cursor));
    if (!Number.isInteger(after)) {
      return fail(400, "invalid_request", "cursor is not one this server gave out");
    }
    list = list.filter((j) => j.id < after);
  }
  const limit = q.has("limit") ? Number(q.get("limit")) : 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    return fail(400, "invalid_request", "limit must be an integer from 1 to 1000");
  }
  const page = list.slice(0, limit);
  return json({ jobs: page, next_cursor: list.length > limit ? btoa(String(page.at(-1)!.id)) : null });
}

async function api(req: Request, path: string): Promise<Response> {
  const url = new URL(req.url);
  if (req.method === "POST" && READ_ONLY) return fail(503, "read_only", "this server is read-only");
  if (req.method === "GET" && FAIL && path === FAIL) {
    return fail(500, "internal", "internal error (the preview server was started with --fail)");
  }
  await new Promise((r) => setTimeout(r, 60)); // a little latency, like a real server
  let m: RegExpMatchArray | null;
  if (req.method === "GET") {
    if (path === "/api/capabilities") {
      return json({ read_only: READ_ONLY, version: "0.1.0", storage: "canonical" });
    }
    if (path === "/api/stats") {
      const t0 = minuteOf(Date.now()) - 59 * 60_000;
      return json({
        counts: countsOf([...jobs.values()]),
        queues: QUEUES.map(queueInfo),
        throughput: Array.from({ length: 60 }, (_, i) => {
          const t = t0 + i * 60_000;
          return { minute: iso(t), ...(throughput.get(t) ?? { completed: 0, failed: 0 }) };
        }),
      });
    }
    if (path === "/api/queues") return json({ queues: QUEUES.map(queueInfo) });
    if (path === "/api/jobs") return listJobs(url.searchParams);
    if ((m = path.match(/^\/api\/jobs\/(\d+)$/))) {
      const job = jobs.get(Number(m[1]));
      if (!job) return fail(404, "not_found", `job ${m[1]} not found`);
      return json({ job, callbacks: callbacks.get(job.id) ?? [] });
    }
    if (path === "/api/kinds") {
      return json({
        kinds: Object.keys(KINDS).map((kind, i) => {
          const list = [...jobs.values()].filter((j) => j.kind === kind);
          const completed = 40 + i * 17;
          const failed = i % 3 === 0 ? 0 : i * 2;
          return {
            kind,
            counts: countsOf(list),
            completed_1h: completed,
            failed_1h: failed,
            failure_rate: (failed + i) / (completed + failed + i),
            run_p50_ms: 80 * (i + 1) ** 2,
            run_p95_ms: 400 * (i + 1) ** 2,
          };
        }),
      });
    }
    if (path === "/api/running") {
      const running = [...jobs.values()].filter((j) => j.state === "running")
        .sort((a, b) => Date.parse(a.attempted_at ?? "9999") - Date.parse(b.attempted_at ?? "9999"));
      return json({ jobs: running, truncated: false });
    }
    if (path === "/api/stats/samples") return json({ samples: samples(url.searchParams) });
    if (path === "/api/cron") return json({ cron });
    if (path === "/api/runtimes") return json({ runtimes });
    if (path === "/api/storage") {
      return json({
        state: "mixed_transition",
        transition: "mixed_transition",
        engine: "queue_storage",
        prepared_engine: "queue_storage",
        canonical_backlog: Math.max(0, 240 - Math.floor((Date.now() - start) / 1000)),
        queue_storage_ready: true,
        queue_storage_schema: "svc_qs",
        runtimes: { canonical_only: 0, queue_storage_capable: 3 },
        blockers: ["canonical backlog: unfinished jobs still in the canonical table"],
        abort_possible: false,
        next_step: "svc storage finalize",
      });
    }
    return fail(404, "not_found", `no route GET ${path}`);
  }
  if (req.method === "POST") {
    if ((m = path.match(/^\/api\/queues\/([^/]+)\/(pause|resume)$/))) {
      const name = decodeURIComponent(m[1]);
      if (!QUEUES.includes(name)) return fail(404, "not_found", `queue ${name} not found`);
      if (m[2] === "pause") paused.add(name);
      else paused.delete(name);
      return json({ queue: queueInfo(name) });
    }
    if ((m = path.match(/^\/api\/jobs\/(\d+)\/(retry|cancel)$/))) {
      const job = jobs.get(Number(m[1]));
      if (!job) return fail(404, "not_found", `job ${m[1]} not found`);
      const terminal = TERMINAL.includes(job.state);
      if (m[2] === "retry") {
        if (!terminal) {
          return fail(
            409,
            "invalid_state",
            `job ${job.id} is ${job.state}: only terminal jobs can be retried`,
          );
        }
        Object.assign(job, { state: "available", attempt: 0, run_at: iso(Date.now()), finalized_at: null });
      } else {
        if (terminal) {
          return fail(
            409,
            "invalid_state",
            `job ${job.id} is ${job.state}: only non-terminal jobs can be cancelled`,
          );
        }
        Object.assign(job, { state: "cancelled", finalized_at: iso(Date.now()) });
      }
      return json({ job });
    }
    if (path === "/api/jobs/bulk-retry" || path === "/api/jobs/bulk-cancel") {
      const body = await req.json().catch(() => ({}));
      const retry = path.endsWith("retry");
      const dry = body.dry_run === true;
      let n = 0;
      for (const j of jobs.values()) {
        if (body.state && j.state !== body.state) continue;
        if (body.kind && j.kind !== body.kind) continue;
        if (body.queue && j.queue !== body.queue) continue;
        const terminal = TERMINAL.includes(j.state);
        if (retry && terminal) {
          if (!dry) {
            Object.assign(j, { state: "available", attempt: 0, run_at: iso(Date.now()), finalized_at: null });
          }
          n++;
        } else if (!retry && !terminal) {
          if (!dry) Object.assign(j, { state: "cancelled", finalized_at: iso(Date.now()) });
          n++;
        }
      }
      return json({ count: n });
    }
    if ((m = path.match(/^\/api\/cron\/([^/]+)\/(trigger|pause|resume)$/))) {
      const entry = cron.find((c) => c.name === decodeURIComponent(m![1]));
      if (!entry) return fail(404, "not_found", `cron ${m[1]} not found`);
      if (m[2] === "trigger") {
        entry.last_fire_at = iso(Date.now());
        return json({ job: makeJob("available", Date.now(), entry.kind) });
      }
      entry.paused = m[2] === "pause";
      entry.next_fire_at = entry.paused ? null : iso(Date.now() + 3_600_000);
      return json({ cron: entry });
    }
    return fail(404, "not_found", `no route POST ${path}`);
  }
  return fail(405, "method_not_allowed", `${req.method} is not allowed here`);
}

const assets = await loadUiAssets();

Deno.serve({ port: PORT, hostname: "127.0.0.1", onListen: () => {} }, async (req) => {
  const path = new URL(req.url).pathname;
  if (path === "/api" || path.startsWith("/api/")) return api(req, path);
  const file = uiFileFor(path);
  // Read again on every request, so a rebuild shows without restarting the preview.
  const asset = file && (await loadUiAssets().catch(() => assets)).get(file);
  if (!asset) return new Response("not found", { status: 404 });
  return new Response(asset.body, {
    headers: { "content-type": asset.contentType, "cache-control": "no-store" },
  });
});
console.log(`preview: http://127.0.0.1:${PORT}/${READ_ONLY ? " (read-only)" : ""}`);

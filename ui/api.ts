/**
 * Typed client of the admin REST API (`docs/reference/rest.md` describes it).
 *
 * Every call fetches a relative `/api/...` URL, so the UI works behind any host or port `svc serve`
 * listens on. Failures are thrown as `ApiError`, carrying the `{"error", "code"}` body of the API
 * (or `network` / `http_<status>` when there was no such body).
 */

import { JOB_STATES, type JobError, type JobState, TERMINAL_STATES } from "../src/types.ts";

export { JOB_STATES };
export type { JobError, JobState };
// The shapes the server writes (src/wire.ts), one definition for the server, the CLI and this UI.
export type {
  CallbackJson as Callback,
  CronJson as Cron,
  JobJson as Job,
  QueueJson as Queue,
  RuntimeJson as Runtime,
} from "../src/wire.ts";
import type { CallbackJson, CronJson, JobJson, QueueJson, RuntimeJson } from "../src/wire.ts";
type Job = JobJson;
/** A queue, with who serves it. */
type Queue = QueueJson;
type Callback = CallbackJson;
type Cron = CronJson;
type Runtime = RuntimeJson;

/** States an admin retry accepts (terminal jobs only: docs/guide/handlers.md, `client.retry`). */
/** What a bulk action by ids answers. */
export interface BulkIdsResult {
  count: number;
  skipped: { id: number; code: "not_found" | "invalid_state"; error: string }[];
}

export const RETRYABLE_STATES: readonly JobState[] = TERMINAL_STATES;
/** States an admin cancel accepts (any non-terminal one). */
export const CANCELLABLE_STATES: readonly JobState[] = JOB_STATES.filter((s) => !TERMINAL_STATES.includes(s));

export type StateCounts = Record<JobState, number>;

export interface ThroughputPoint {
  minute: string;
  completed: number;
  failed: number;
}

export interface Stats {
  counts: StateCounts;
  /** States whose count is a lower bound. */
  approximate?: JobState[];
  queues: Queue[];
  /** Queues whose available jobs no live runtime will run. */
  unserved?: Unserved[];
  throughput: ThroughputPoint[];
}

/** A queue whose available jobs no live runtime will run (none serves it, or none handles some kinds). */
export interface Unserved {
  queue: string;
  available: number;
  live_runtimes: number;
  unhandled_kinds: string[];
}

/** Why a queue's available jobs are not run, or null. */
export function unservedText(
  u: { available?: number; live_runtimes?: number; unhandled_kinds?: string[] },
): string | null {
  if (!u.available) return null;
  if (u.live_runtimes === 0) return "no live runtime serves this queue";
  if (u.unhandled_kinds?.length) {
    return `no live runtime here has a handler for ${u.unhandled_kinds.join(", ")}`;
  }
  return null;
}

export interface JobFilter {
  state?: JobState | "";
  kind?: string;
  queue?: string;
  tag?: string;
  q?: string;
  limit?: number;
  cursor?: string;
}

export interface JobPage {
  jobs: Job[];
  next_cursor: string | null;
}

export interface JobDetail {
  job: Job;
  callbacks: Callback[];
  /** Why the job will not run when due; null when it will or is not waiting to run. */
  unserved?: string | null;
}

export interface BulkFilter {
  state?: JobState;
  kind?: string;
  queue?: string;
}

export interface EnqueueRequest {
  kind: string;
  args: Record<string, unknown>;
  queue?: string;
  priority?: number;
  run_at?: string;
  max_attempts?: number;
}

export interface KindInfo {
  kind: string;
  counts: StateCounts;
  /** The last hour, from the leader's per-minute samples (absent from servers without them). */
  completed_1h?: number;
  failed_1h?: number;
  retried_1h?: number;
  /** Failed attempts (retried or not) over finished attempts in the last hour; null when none finished. */
  failure_rate?: number | null;
  run_p50_ms?: number | null;
  run_p95_ms?: number | null;
}

/** One row of the leader's per-minute samples: a queue's depth (kind null) or a (queue, kind)'s attempts. */
export interface Sample {
  minute: string;
  queue: string;
  kind: string | null;
  depth: number | null;
  completed: number;
  failed: number;
  retried: number;
  run_p50_ms: number | null;
  run_p95_ms: number | null;
}

export interface SampleFilter {
  queue?: string;
  kind?: string;
  minutes?: number;
}

export interface RunningJobs {
  jobs: Job[];
  /** More jobs run than the limit asked for. */
  truncated: boolean;
}

/** GET /api/storage: the storage engine and where the canonical → queue_storage transition stands. */
export interface Storage {
  /** Where new writes go: `canonical` or `queue_storage`. */
  engine: string;
  /** The same as `state`. */
  transition: string;
  state?: string;
  prepared_engine?: string | null;
  /** Unfinished jobs still in the canonical table. */
  canonical_backlog?: number;
  queue_storage_ready?: boolean;
  queue_storage_schema?: string | null;
  runtimes?: { canonical_only: number; queue_storage_capable: number };
  /** What keeps the next step from being taken, one line each. */
  blockers?: string[];
  abort_possible?: boolean;
  /** The command of the next step; null once active. */
  next_step?: string | null;
}

export interface Capabilities {
  read_only: boolean;
  version: string;
  storage: string;
  /** The server has a token (`--auth-token`): every other API call needs the session of the login form. */
  auth_required?: boolean;
  /** This browser's session carries the token (true when none is needed). */
  authenticated?: boolean;
  /** The queue the enqueue form proposes (`svc dev`: its dev queue); older servers leave it out. */
  default_queue?: string;
}

/** An error answered by the API (or met on the way to it). */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
    this.name = "ApiError";
  }
}

/** Turns anything thrown into an ApiError, so the banner always has a message and a code. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof Error) return new ApiError(0, "client", err.message);
  return new ApiError(0, "client", String(err));
}

async function request<T>(
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<T> {
  const init: RequestInit = { method, headers: { accept: "application/json" }, signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { accept: "application/json", "content-type": "application/json" };
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    throw new ApiError(0, "network", `Cannot reach the server (${method} ${path}).`);
  }
  const text = await res.text();
  let data: unknown = null;
  if (text !== "") {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data as { error?: unknown; code?: unknown } | null;
    if (e && typeof e.error === "string") {
      throw new ApiError(res.status, typeof e.code === "string" ? e.code : `http_${res.status}`, e.error);
    }
    throw new ApiError(res.status, `http_${res.status}`, `${method} ${path} answered HTTP ${res.status}.`);
  }
  if (data === null) {
    throw new ApiError(res.status, "invalid_response", `${method} ${path} did not answer JSON.`);
  }
  return data as T;
}

const seg = encodeURIComponent;

/** Query string of a job filter, leaving out empty fields. */
export function jobQuery(filter: JobFilter): string {
  const p = new URLSearchParams();
  for (const key of ["state", "kind", "queue", "tag", "q", "limit", "cursor"] as const) {
    const v = filter[key];
    if (v !== undefined && v !== "" && v !== null) p.set(key, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : "";
}

export const api = {
  capabilities: (signal?: AbortSignal) =>
    request<Capabilities>("GET", "/api/capabilities", undefined, signal),
  stats: (signal?: AbortSignal) => request<Stats>("GET", "/api/stats", undefined, signal),
  storage: (signal?: AbortSignal) => request<Storage>("GET", "/api/storage", undefined, signal),

  queues: (signal?: AbortSignal) => request<{ queues: Queue[] }>("GET", "/api/queues", undefined, signal),
  pauseQueue: (name: string) => request<{ queue: Queue }>("POST", `/api/queues/${seg(name)}/pause`),
  resumeQueue: (name: string) => request<{ queue: Queue }>("POST", `/api/queues/${seg(name)}/resume`),
  /**
   * Sets a queue's fleet-wide limits (every kind at once: a missing one is no limit of that kind); null
   * removes every limit, keeping the row.
   */
  setQueueLimits: (
    name: string,
    limits: {
      rate?: number;
      per_ms?: number;
      concurrency?: number;
      per_key?: number;
      count_parked?: boolean;
    } | null,
  ) => request<{ limit: Queue["limit"] }>("PUT", `/api/queues/${seg(name)}/limit`, limits ?? {}),

  jobs: (filter: JobFilter, signal?: AbortSignal) =>
    request<JobPage>("GET", `/api/jobs${jobQuery(filter)}`, undefined, signal),
  job: (id: number | string, signal?: AbortSignal) =>
    request<JobDetail>("GET", `/api/jobs/${seg(String(id))}`, undefined, signal),
  enqueue: (body: EnqueueRequest) => request<{ job: Job }>("POST", "/api/jobs", body),
  retryJob: (id: number) => request<{ job: Job }>("POST", `/api/jobs/${id}/retry`),
  cancelJob: (id: number) => request<{ job: Job }>("POST", `/api/jobs/${id}/cancel`),
  /** Deletes a finished job for good (the server logs it). */
  deleteJob: (id: number) => request<{ job: Job }>("DELETE", `/api/jobs/${id}`),
  /** With `dryRun` only counts the jobs it would retry (nothing changes). */
  bulkRetry: (filter: BulkFilter, o: { dryRun?: boolean } = {}) =>
    request<{ count: number }>("POST", "/api/jobs/bulk-retry", { ...filter, dry_run: o.dryRun === true }),
  /**
   * Retry, cancel or delete the jobs named (at most 500), one by one on the server; the answer counts
   * those acted on and lists the others (gone, or in a state the action does not apply to) in `skipped`.
   */
  bulkIds: (verb: "retry" | "cancel" | "delete", ids: number[]) =>
    request<BulkIdsResult>("POST", `/api/jobs/bulk-${verb}`, { ids }),
  /** With `dryRun` only counts the jobs it would cancel (nothing changes). */
  bulkCancel: (filter: BulkFilter, o: { dryRun?: boolean } = {}) =>
    request<{ count: number }>("POST", "/api/jobs/bulk-cancel", { ...filter, dry_run: o.dryRun === true }),

  kinds: (signal?: AbortSignal) => request<{ kinds: KindInfo[] }>("GET", "/api/kinds", undefined, signal),
  /**
   * The leader's per-minute samples, oldest first; null when this server has no samples route (404: a
   * server older than the samples), so that pages show an empty state instead of an error.
   */
  samples: async (f: SampleFilter, signal?: AbortSignal): Promise<Sample[] | null> => {
    const p = new URLSearchParams();
    if (f.queue) p.set("queue", f.queue);
    if (f.kind) p.set("kind", f.kind);
    p.set("minutes", String(f.minutes ?? 60));
    try {
      return (await request<{ samples: Sample[] }>("GET", `/api/stats/samples?${p}`, undefined, signal))
        .samples;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  },

  cron: (signal?: AbortSignal) => request<{ cron: Cron[] }>("GET", "/api/cron", undefined, signal),
  triggerCron: (name: string) => request<{ job: Job }>("POST", `/api/cron/${seg(name)}/trigger`),
  pauseCron: (name: string) => request<{ cron: Cron }>("POST", `/api/cron/${seg(name)}/pause`),
  resumeCron: (name: string) => request<{ cron: Cron }>("POST", `/api/cron/${seg(name)}/resume`),

  runtimes: (signal?: AbortSignal) =>
    request<{ runtimes: Runtime[] }>("GET", "/api/runtimes", undefined, signal),
  running: (limit: number, signal?: AbortSignal) =>
    request<RunningJobs>("GET", `/api/running?limit=${limit}`, undefined, signal),

  /** Opens a session (an HttpOnly cookie the browser keeps); 401 `unauthorized` for a wrong token. */
  login: (token: string) => request<{ authenticated: boolean }>("POST", "/api/login", { token }),
  logout: () => request<{ authenticated: boolean }>("POST", "/api/logout"),
};

/**
 * The metrics of svc (docs/reference/metrics.md lists them): one set per process, shared by the clients
 * and workers in it, written by `GET /metrics` of the worker's health listener and of `svc serve`, and
 * recorded through `@opentelemetry/api`.
 *
 * Labels are bounded, whatever producers send: a kind is its own label only when a worker of this process
 * runs it (or a client declared it), else `other`; a queue is its own label when a worker of this process
 * serves it or among the first `MAX_QUEUE_LABELS` queues seen, else `other`. No job ids.
 */
import {
  type CounterFamily,
  type CounterHandle,
  type GaugeFamily,
  type HistogramFamily,
  type HistogramHandle,
  MetricsRegistry,
  NOOP_HANDLE,
} from "./registry.ts";

/** Queues seen beyond those a worker serves that get a label of their own. */
export const MAX_QUEUE_LABELS = 100;
/** The label of kinds and queues that do not get one of their own. */
export const OTHER = "other";

/** Bucket bounds of the pickup lag, from 10 ms to an hour. */
const LAG_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** The handles of one (queue, kind), resolved once. */
export interface JobHandles {
  enqueued: CounterHandle;
  claimed: CounterHandle;
  completed: CounterHandle;
  failed: CounterHandle;
  retried: CounterHandle;
  snoozed: CounterHandle;
  cancelled: CounterHandle;
  callbackRegistered: CounterHandle;
  duration: HistogramHandle;
  pickupLag: HistogramHandle;
}

/** Handles that record nothing (`metrics: false`). */
export const NOOP_JOB: JobHandles = {
  enqueued: NOOP_HANDLE,
  claimed: NOOP_HANDLE,
  completed: NOOP_HANDLE,
  failed: NOOP_HANDLE,
  retried: NOOP_HANDLE,
  snoozed: NOOP_HANDLE,
  cancelled: NOOP_HANDLE,
  callbackRegistered: NOOP_HANDLE,
  duration: NOOP_HANDLE,
  pickupLag: NOOP_HANDLE,
};

/** Labels of the per-job metrics. */
const QK = ["queue", "kind"] as const;

/** Every metric: its type, labels and help (docs/reference/metrics.md lists the same). */
const SPECS = {
  svc_jobs_enqueued_total: ["counter", QK, "Jobs enqueued by this process"],
  svc_jobs_claimed_total: ["counter", QK, "Attempts claimed by this process"],
  svc_jobs_completed_total: ["counter", QK, "Attempts whose handler completed"],
  svc_jobs_failed_total: ["counter", QK, "Attempts that failed for good"],
  svc_jobs_retried_total: ["counter", QK, "Attempts that failed and were scheduled again"],
  svc_jobs_snoozed_total: ["counter", QK, "Attempts that snoozed"],
  svc_jobs_cancelled_total: ["counter", QK, "Jobs cancelled through this process (client, CLI, REST)"],
  svc_callbacks_registered_total: ["counter", QK, "Callbacks registered by attempts of this process"],
  svc_job_duration_seconds: [
    "histogram",
    QK,
    "Handler run time of an attempt, from its start to its outcome",
  ],
  svc_job_pickup_lag_seconds: [
    "histogram",
    QK,
    "From when a job became due (enqueue or run_at) to its start",
  ],
  svc_jobs_rescued_total: [
    "counter",
    ["kind"],
    "Attempts rescued by the leader (stale heartbeat or deadline)",
  ],
  svc_jobs_in_flight: ["gauge", ["queue"], "Attempts running in this process"],
  svc_jobs_prefetched: ["gauge", ["queue"], "Claimed attempts held in this process's prefetch buffer"],
  svc_jobs_stuck: [
    "gauge",
    ["queue"],
    "Aborted handlers (cancel, deadline, shutdown) that have not returned within the stuck grace; each keeps its slot",
  ],
  svc_queue_depth: ["gauge", ["queue"], "Available jobs of a queue (an estimate, read at most every 5 s)"],
  svc_queue_oldest_available_age_seconds: ["gauge", ["queue"], "Age of the oldest available job of a queue"],
  svc_callbacks_resolved_total: [
    "counter",
    ["action", "outcome"],
    "Callback requests this receiver resolved",
  ],
  svc_callback_requests_rejected_total: ["counter", ["code"], "Callback requests this receiver refused"],
  svc_callbacks_timed_out_total: [
    "counter",
    ["kind"],
    "Callbacks whose deadline passed (expired by the leader)",
  ],
  svc_leader_duty_runs_total: [
    "counter",
    ["duty", "outcome"],
    "Leader duty runs (outcome ok, error, not_leader)",
  ],
  svc_leader_duty_duration_seconds: ["histogram", ["duty"], "Run time of a leader duty"],
  svc_claim_duration_seconds: ["histogram", ["queue"], "Run time of a claim statement"],
  svc_limit_in_use: [
    "gauge",
    ["queue", "limit"],
    "Use of a queue's fleet-wide limit: attempts open (concurrency), jobs claimed in the current window (rate), attempts holding a key's unit (per_key)",
  ],
  svc_limit_throttled_total: [
    "counter",
    ["queue", "limit"],
    "Claims of this process that a fleet-wide limit of the queue cut short (limit: rate, concurrency or per_key)",
  ],
  svc_completion_batch_duration_seconds: ["histogram", [], "Run time of a completion statement (one batch)"],
  svc_ring_prune_total: ["counter", ["outcome"], "Queue storage: the leader's looks at sealed ring slots"],
} as const;

type Specs = typeof SPECS;
/** The families of the metrics, by name. */
export type Families = {
  [K in keyof Specs]: Specs[K][0] extends "counter" ? CounterFamily
    : Specs[K][0] extends "histogram" ? HistogramFamily
    : GaugeFamily;
};

/** The metric of each per-job handle. */
const PER_JOB: Record<keyof JobHandles, keyof Specs> = {
  enqueued: "svc_jobs_enqueued_total",
  claimed: "svc_jobs_claimed_total",
  completed: "svc_jobs_completed_total",
  failed: "svc_jobs_failed_total",
  retried: "svc_jobs_retried_total",
  snoozed: "svc_jobs_snoozed_total",
  cancelled: "svc_jobs_cancelled_total",
  callbackRegistered: "svc_callbacks_registered_total",
  duration: "svc_job_duration_seconds",
  pickupLag: "svc_job_pickup_lag_seconds",
};

function createFamilies(r: MetricsRegistry): Families {
  const out: Record<string, unknown> = {};
  for (const [name, [type, labels, help]] of Object.entries(SPECS)) {
    out[name] = type === "counter"
      ? r.counter(name, help, labels)
      : type === "gauge"
      ? r.gauge(name, help, labels)
      : r.histogram(name, help, labels, name === "svc_job_pickup_lag_seconds" ? LAG_BUCKETS : undefined);
  }
  return out as Families;
}

export class SvcMetrics {
  readonly registry: MetricsRegistry = new MetricsRegistry();
  /** Every family, by metric name. */
  readonly f: Families = createFamilies(this.registry);

  private readonly kinds = new Set<string>();
  private readonly queues = new Set<string>();
  /** Resolved handles per queue label, then kind label. */
  private readonly handles = new Map<string, Map<string, JobHandles>>();

  /** Kinds that get a label of their own (those a worker of this process runs). */
  knowKinds(kinds: Iterable<string>): void {
    for (const k of kinds) this.kinds.add(k);
  }
  /** Queues that get a label of their own (those a worker of this process serves). */
  knowQueues(queues: Iterable<string>): void {
    for (const q of queues) this.queues.add(q);
  }

  kindLabel(kind: string): string {
    return this.kinds.has(kind) ? kind : OTHER;
  }
  queueLabel(queue: string): string {
    if (this.queues.has(queue)) return queue;
    if (this.queues.size >= MAX_QUEUE_LABELS) return OTHER;
    this.queues.add(queue);
    return queue;
  }

  /** The handles of a job's (queue, kind): two map lookups once resolved, no allocation. */
  job(queue: string, kind: string): JobHandles {
    let h = this.handles.get(queue)?.get(kind);
    if (h) return h;
    const ql = this.queueLabel(queue), kl = this.kindLabel(kind);
    // Resolve through the labels, so that every unknown kind of a queue shares the `other` handles.
    h = this.handles.get(ql)?.get(kl);
    if (!h) {
      h = {} as JobHandles;
      for (const [k, name] of Object.entries(PER_JOB)) {
        (h as unknown as Record<string, unknown>)[k] = (this.f[name] as CounterFamily | HistogramFamily).with(
          ql,
          kl,
        );
      }
      this.remember(ql, kl, h);
    }
    // Known labels are cached under the raw names too; unknown ones are not, so they cannot grow the map.
    if (ql === queue && kl === kind) this.remember(queue, kind, h);
    return h;
  }

  private remember(queue: string, kind: string, h: JobHandles): void {
    let byKind = this.handles.get(queue);
    if (!byKind) this.handles.set(queue, byKind = new Map());
    byKind.set(kind, h);
  }
}

let processMetrics: SvcMetrics | null = null;

/** The metrics of this process (created on first use). */
export function svcMetrics(): SvcMetrics {
  return processMetrics ??= new SvcMetrics();
}

/**
 * The metrics of this process as Prometheus text (what `GET /metrics` answers), for an endpoint of your
 * own.
 */
export function metricsText(): Promise<string> {
  return svcMetrics().registry.text();
}

/**
 * The options of `createWorker`, and their resolution: defaults applied and every value checked before
 * anything connects (a bad value throws a `ValidationError` naming the option).
 */
import type { Client } from "../client/client.ts";
import type { Driver } from "../db/driver.ts";
import { validateQueueName } from "../client/enqueue_input.ts";
import { ValidationError } from "../errors.ts";
import { env } from "../runtime/runtime.ts";
import type { Logger } from "../types.ts";
import type { Retention } from "../storage/engine.ts";
import type { QueueConfig } from "./dispatcher.ts";
import type { HandlerEntry } from "./handlers.ts";
import { type HttpWorkerConfig, validateHttpWorkerConfig } from "./http_worker.ts";
import type { WorkerEvents } from "./events.ts";
import { defaultLogger } from "./logger.ts";
import { parseHealthAddr } from "./health_listener.ts";
import { type CronDefinition, normalizeCronMap, type NormalizedCron } from "../cron/definition.ts";
import { outcomeRetryBudget } from "./outcome_retry.ts";

/** Options of `createWorker`. */
export interface WorkerOptions {
  /** Postgres URL (default env DATABASE_URL); the worker opens its own pool. */
  databaseUrl?: string;
  /** Or a client whose pool the worker shares. */
  client?: Client;
  /** Or a driver of your own (the worker never closes it). */
  driver?: Driver;
  /** Postgres schema (default `svc`). */
  schema?: string;
  /** Shared pool size (default 10); the leader's connection and the LISTEN connection come on top. */
  maxConnections?: number;
  /** Queues this process works, with their concurrency. */
  queues: Record<string, QueueConfig>;
  /** Handlers per job kind. */
  handlers?: Record<string, HandlerEntry>;
  /** Job kinds pushed to HTTP function endpoints (mode `async`), keyed by kind. */
  httpWorkers?: Record<string, HttpWorkerConfig>;
  /** Poll interval of the claim loops in ms (default 500). */
  pollInterval?: number;
  /** Heartbeat interval in ms (default 30 000). */
  heartbeatInterval?: number;
  /** A running attempt whose heartbeat is older than this is rescued (default 90 000 ms). */
  rescueAfter?: number;
  /** How often a non-leader tries to take leadership, in ms (default 10 000). */
  leaderElectionInterval?: number;
  /**
   * A leader that has not renewed its term for this long (ms, default 15 000) is replaced: its lock
   * session is ended by the next process that tries to lead (docs/guide/operations.md, "The leader").
   */
  leaderTtl?: number;
  /** How often the leader runs its duties, in ms (default 1 000). */
  maintenanceInterval?: number;
  /**
   * Queue storage: an attempt that has run longer than this (ms, default 10 minutes) moves out of the
   * ring, so that a long job does not keep its ring slot from being reclaimed.
   */
  parkAfter?: number;
  /** Retention of finished jobs in ms (completed 24 h, failed/cancelled 7 days). `completed: 0` deletes at completion. */
  retention?: Partial<Retention>;
  /** Use LISTEN/NOTIFY wake-ups (default true); without it the claim loops poll. */
  listen?: boolean;
  /**
   * Anything with debug/info/warn/error (default: console without debug; JSON lines with
   * `SERVICE_LOG_FORMAT=json`).
   */
  logger?: Logger;
  /** Event hooks. */
  on?: WorkerEvents;
  /**
   * Cron schedules this deployment declares, by name. Upserted into the cron table at start (rows
   * of other names are left alone); the elected leader enqueues their jobs.
   */
  cron?: Record<string, CronDefinition>;
  /**
   * Storage engines this process executes (default both). `["canonical"]` behaves as a worker of the older
   * release line (it claims only canonical jobs, and is refused once the storage transition is active).
   */
  engines?: ("canonical" | "queue_storage")[];
  /**
   * host:port of the health listener (`/healthz`, `/readyz`, and `/metrics` unless `metrics: false`);
   * default env SERVICE_HEALTH_ADDR; off without either.
   */
  healthAddr?: string;
  /**
   * Metrics (default true): recorded through `@opentelemetry/api` and written as Prometheus text on the
   * health listener's `GET /metrics` (docs/reference/metrics.md). `false` records nothing.
   */
  metrics?: boolean;
  /**
   * Traces (default true): a span per attempt through `@opentelemetry/api`, child of the producer's span
   * captured at enqueue; HTTP workers send the request span's `traceparent` to the function endpoint.
   */
  tracing?: boolean;
  /**
   * Deadline of the first connection in ms (default 10 000): `start()` rejects when no PostgreSQL has
   * answered by then (refused, silent, or an address that answers but is not PostgreSQL).
   */
  connectTimeout?: number;
}

/** `WorkerOptions` with their defaults, checked. */
export interface ResolvedWorkerOptions {
  logger: Logger;
  on: WorkerEvents;
  pollInterval: number;
  heartbeatInterval: number;
  rescueAfter: number;
  electionInterval: number;
  leaderTtl: number;
  maintenanceInterval: number;
  retention: Retention;
  parkAfter: number;
  maxConnections: number;
  connectTimeout: number;
  /** How long a failing outcome write is retried (ms): `outcome_retry.ts`. */
  outcomeRetryMs: number;
  cronDefs: NormalizedCron[];
  /** host:port of the health listener, or undefined (off). */
  healthAddr: string | undefined;
}

/** Applies the defaults of `WorkerOptions` and checks every value; throws `ValidationError` on a bad one. */
export function resolveWorkerOptions(opts: WorkerOptions): ResolvedWorkerOptions {
  const heartbeatInterval = opts.heartbeatInterval ?? 30_000;
  const rescueAfter = opts.rescueAfter ?? 90_000;
  const leaderTtl = opts.leaderTtl ?? 15_000;
  if (!Number.isFinite(leaderTtl) || leaderTtl < 1_000) {
    throw new ValidationError("createWorker: leaderTtl must be at least 1000 ms");
  }
  const connectTimeout = opts.connectTimeout ?? 10_000;
  if (!Number.isFinite(connectTimeout) || connectTimeout <= 0) {
    throw new ValidationError("createWorker: connectTimeout must be a positive number of milliseconds");
  }
  if (!opts.queues || Object.keys(opts.queues).length === 0) {
    throw new ValidationError(
      "createWorker: configure at least one queue, e.g. queues: { default: { maxWorkers: 10 } }",
    );
  }
  Object.keys(opts.queues).forEach(validateQueueName);
  const healthAddr = opts.healthAddr ?? env("SERVICE_HEALTH_ADDR");
  if (healthAddr) parseHealthAddr(healthAddr);
  for (const [kind, cfg] of Object.entries(opts.httpWorkers ?? {})) validateHttpWorkerConfig(kind, cfg);
  return {
    logger: opts.logger ?? defaultLogger(env("SERVICE_LOG_FORMAT")),
    on: opts.on ?? {},
    pollInterval: opts.pollInterval ?? 500,
    heartbeatInterval,
    rescueAfter,
    electionInterval: opts.leaderElectionInterval ?? 10_000,
    leaderTtl,
    maintenanceInterval: opts.maintenanceInterval ?? 1_000,
    retention: { completed: 86_400_000, failed: 604_800_000, ...opts.retention },
    parkAfter: opts.parkAfter ?? 600_000,
    maxConnections: opts.maxConnections ?? 10,
    connectTimeout,
    outcomeRetryMs: outcomeRetryBudget(rescueAfter, heartbeatInterval),
    cronDefs: normalizeCronMap(opts.cron ?? {}),
    healthAddr,
  };
}

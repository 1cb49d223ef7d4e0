/**
 * The options of `createWorker`, and their resolution: defaults applied and every value checked before
 * anything connects (a bad value throws a `ValidationError` naming the option).
 */
import type { Client } from "../client/client.ts";
import type { Driver } from "../db/driver.ts";
import { validateQueueName } from "../client/enqueue_input.ts";
import { ValidationError } from "../errors.ts";
import { env } from "../platform/platform.ts";
import type { Logger } from "../types.ts";
import type { Retention } from "../storage/engine.ts";
import type { QueueConfig } from "./dispatcher.ts";
import type { HandlerMap } from "./handlers.ts";
import { type AnyTasks, checkSchemaMap, type SchemaMap, type TaskSchemas } from "../tasks.ts";
import { type HttpWorkerConfig, validateHttpWorkerConfig } from "./http_worker.ts";
import type { WorkerEvents } from "./events.ts";
import { defaultLogger } from "./logger.ts";
import { parseHealthAddr } from "./health_listener.ts";
import { type CronDefinition, normalizeCronMap, type NormalizedCron } from "../cron/definition.ts";
import { outcomeRetryBudget } from "./outcome_retry.ts";
import { checkPoolerMode, poolerFromUrl, type PoolerMode } from "../db/pooler.ts";

/** Options of `createWorker`. `T` is the task map (`createWorker<Tasks>()`, or the client's). */
export interface WorkerOptions<T extends object = AnyTasks> {
  /** Postgres URL (default env DATABASE_URL); the worker opens its own pool. */
  databaseUrl?: string;
  /** Or a client whose pool the worker shares (and its task map and schemas). */
  client?: Client<T>;
  /** Or a driver of your own (the worker never closes it). */
  driver?: Driver;
  /** Postgres schema (default `svc`). */
  schema?: string;
  /** Shared pool size (default 10); the LISTEN connection comes on top. */
  maxConnections?: number;
  /** Queues this process works, with their concurrency. */
  queues: Record<string, QueueConfig>;
  /** Handlers per job kind (with a task map: its kinds, each handler typed by its entry). */
  handlers?: HandlerMap<T>;
  /**
   * Args schemas by kind, any Standard Schema validator (default: the client's `schemas`): a job whose
   * args its kind's schema refuses fails at once with the validator's messages, before the handler runs;
   * the handler gets the schema's output as `job.args`. (HTTP worker kinds are not validated here.)
   */
  schemas?: TaskSchemas<T>;
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
   * A leader that has not renewed its term for this long (ms, default 15 000) is replaced by the next
   * process that tries to lead (docs/guide/operations.md, "The leader").
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
   * A handler aborted (cancel, deadline, shutdown) keeps its slot until it returns; one that has not
   * returned this long after its abort (ms, default 5 000) is reported stuck (log, `svc_jobs_stuck`,
   * the heartbeat), and `shutdown()` waits at most this long for such handlers after its drain.
   */
  stuckGrace?: number;
  /**
   * `"transaction"` when `databaseUrl` goes through a transaction pooler (PgBouncer in transaction mode,
   * Supavisor, Neon's pooled endpoint, RDS Proxy): no session state is relied on, and LISTEN comes from
   * `listenUrl` or the claim loops poll (docs/guide/poolers.md). Default: the client's, else env
   * SERVICE_POOLER, else recognised from the URL's host or port, else `"none"`.
   */
  pooler?: PoolerMode;
  /**
   * A direct URL (not through a transaction pooler) for the LISTEN connection, default env
   * DATABASE_LISTEN_URL: with a pooled `databaseUrl`, wake-ups then stay instant; everything else still
   * goes through `databaseUrl`.
   */
  listenUrl?: string;
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
  /** `schemas` checked (the client's are added when the worker is created). */
  schemas: SchemaMap;
  /** `listenUrl` or DATABASE_LISTEN_URL, checked. */
  listenUrl: string | undefined;
  stuckGrace: number;
}

/** Applies the defaults of `WorkerOptions` and checks every value; throws `ValidationError` on a bad one. */
export function resolveWorkerOptions(opts: WorkerOptions<any>): ResolvedWorkerOptions {
  const heartbeatInterval = opts.heartbeatInterval ?? 30_000;
  const rescueAfter = opts.rescueAfter ?? 90_000;
  const leaderTtl = opts.leaderTtl ?? 15_000;
  if (!Number.isFinite(leaderTtl) || leaderTtl < 1_000) {
    throw new ValidationError("createWorker: leaderTtl must be at least 1000 ms");
  }
  const stuckGrace = opts.stuckGrace ?? 5_000;
  if (!Number.isFinite(stuckGrace) || stuckGrace < 0) {
    throw new ValidationError("createWorker: stuckGrace must be a number of milliseconds, 0 or more");
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
  if (opts.pooler !== undefined) checkPoolerMode(opts.pooler, "createWorker: pooler");
  const listenUrl = opts.listenUrl ?? env("DATABASE_LISTEN_URL");
  if (listenUrl !== undefined) checkListenUrl(listenUrl, opts.listenUrl !== undefined);
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
    schemas: checkSchemaMap("createWorker: schemas", opts.schemas),
    listenUrl,
    stuckGrace,
  };
}

/** A LISTEN URL must be a postgres URL and not a transaction pooler's. */
function checkListenUrl(url: string, fromOption: boolean): void {
  const name = fromOption ? "createWorker: listenUrl" : "DATABASE_LISTEN_URL";
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ValidationError(`${name} is not a URL: give a direct postgres:// URL`);
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") {
    throw new ValidationError(`${name} must be a postgres:// URL, got ${u.protocol}`);
  }
  const pooled = poolerFromUrl(url);
  if (pooled) {
    throw new ValidationError(
      `${name} goes through ${pooled}, where LISTEN does not work: give the database's direct URL`,
    );
  }
}

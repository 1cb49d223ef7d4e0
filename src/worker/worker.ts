/**
 * `createWorker`: the application process. Owns one dispatcher per queue, the heartbeat loop, the
 * maintenance loop (elected leader), the notifier, and their lifecycle from `start` to `shutdown`.
 */
import { connect, connectWithin, poolTarget } from "../db/connection.ts";
import { type Driver, postgresDriver } from "../db/driver.ts";
import { type Client, createClient } from "../client/client.ts";
import { EXPECTED_SCHEMA_VERSION, readSchemaVersion } from "../db/schema_version.ts";
import { SchemaOutdatedError, ValidationError } from "../errors.ts";
import { env, hostname, pid } from "../runtime/runtime.ts";
import type { Job, Logger, ReadinessReport } from "../types.ts";
import type { KindPolicy, Retention } from "../storage/engine.ts";
import { validateQueueName } from "../client/enqueue_input.ts";
import { RoutedEngine } from "../storage/routed.ts";
import { Dispatcher, type QueueConfig } from "./dispatcher.ts";
import { type ExecutorDeps, fail, type InFlight } from "./executor.ts";
import { defaultBackoff, type HandlerEntry, type KindRunner, toRunner } from "./handlers.ts";
import { createHttpRunner, type HttpWorkerConfig, validateHttpWorkerConfig } from "./http_worker.ts";
import { Completer } from "./completer.ts";
import { outcomeRetryBudget } from "./outcome_retry.ts";
import { CallbackWaiters } from "./callback_waiters.ts";
import { HeartbeatLoop } from "./heartbeat.ts";
import { LeaderElection } from "./leader.ts";
import { type Duty, MaintenanceLoop } from "./maintenance/maintenance.ts";
import { listenNotifier, type Notifier, pollingNotifier } from "./notifier.ts";
import type { WorkerEvents } from "./events.ts";
import { emit } from "./events.ts";
import { defaultLogger } from "./logger.ts";
import { cronDuty } from "./maintenance/cron.ts";
import { parseHealthAddr, startHealthListener } from "./health_listener.ts";
import { type CronDefinition, normalizeCronMap } from "../cron/definition.ts";
import { NOOP_JOB, OTHER, svcMetrics } from "../metrics/svc_metrics.ts";
import { workerGauges } from "../metrics/gauges.ts";

export type { QueueConfig } from "./dispatcher.ts";

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

/** A worker process. */
export interface Worker {
  /** This process's id in the runtimes table. */
  readonly id: string;
  /** Whether this process is the elected leader now. */
  readonly isLeader: boolean;
  start(): Promise<void>;
  /** Stops claiming, drains in-flight handlers up to `drainTimeout` ms (default 30 000), then aborts the rest. */
  shutdown(drainTimeout?: number): Promise<void>;
  /** Exactly the `/readyz` body. */
  healthCheck(): Promise<ReadinessReport>;
}

/** Extension points for the parts of a worker built in their own modules (HTTP workers, cron, health listener). */
export interface WorkerExtensions {
  /** Extra executors per job kind (the HTTP worker registers here). */
  runners?: Map<string, KindRunner>;
  /** Extra leader duties (cron). */
  duties?: Duty[];
  /** Called after start with the worker; returns a stop function (the health listener). */
  onStart?: ((w: Worker) => Promise<() => Promise<void>>)[];
}

/** Creates a worker; nothing connects before `start()`. */
export function createWorker(opts: WorkerOptions, ext: WorkerExtensions = {}): Worker {
  const logger = opts.logger ?? defaultLogger(env("SERVICE_LOG_FORMAT"));
  const on = opts.on ?? {};
  const pollInterval = opts.pollInterval ?? 500;
  const heartbeatInterval = opts.heartbeatInterval ?? 30_000;
  const rescueAfter = opts.rescueAfter ?? 90_000;
  const electionInterval = opts.leaderElectionInterval ?? 10_000;
  const leaderTtl = opts.leaderTtl ?? 15_000;
  if (!Number.isFinite(leaderTtl) || leaderTtl < 1_000) {
    throw new ValidationError("createWorker: leaderTtl must be at least 1000 ms");
  }
  const maintenanceInterval = opts.maintenanceInterval ?? 1_000;
  const retention: Retention = { completed: 86_400_000, failed: 604_800_000, ...opts.retention };
  const parkAfter = opts.parkAfter ?? 600_000;
  const maxConnections = opts.maxConnections ?? 10;
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
  const cronDefs = normalizeCronMap(opts.cron ?? {});
  const healthAddr = opts.healthAddr ?? env("SERVICE_HEALTH_ADDR");
  if (healthAddr) parseHealthAddr(healthAddr);
  for (const [kind, cfg] of Object.entries(opts.httpWorkers ?? {})) validateHttpWorkerConfig(kind, cfg);

  let client: Client;
  let ownsPool = false;
  if (opts.client) {
    client = opts.client;
  } else if (opts.driver) {
    client = createClient({
      driver: opts.driver,
      schema: opts.schema,
      heartbeatInterval,
      metrics: opts.metrics !== false,
    });
  } else {
    const url = opts.databaseUrl ?? env("DATABASE_URL");
    if (!url) {
      throw new ValidationError("createWorker: no database URL: pass databaseUrl or set DATABASE_URL");
    }
    // The leader lock and LISTEN open their own connections on top of this pool (src/db/driver.ts).
    const sql = connect(url, { max: maxConnections, applicationName: "svc-worker" });
    client = createClient({
      driver: postgresDriver(sql, { owned: true }),
      schema: opts.schema,
      heartbeatInterval,
      metrics: opts.metrics !== false,
    });
    ownsPool = true;
  }
  const driver = client.driver;
  const db = driver.db;
  // A worker restricted to some engines (`engines: ["canonical"]` acts as a process of the older line)
  // routes on its own; otherwise it shares the client's engine.
  const engine = opts.engines
    ? new RoutedEngine(client.db, client.names, {
      liveWithinMs: 3 * heartbeatInterval,
      engines: opts.engines,
    })
    : client.engine;
  const names = client.names;
  const id = `${hostname()}:${pid()}:${crypto.randomUUID().slice(0, 8)}`;

  const metrics = opts.metrics === false ? null : svcMetrics();
  const runners = new Map<string, KindRunner>();
  /** Parks of HTTP attempts still being written (their slots are free already); shutdown waits for them. */
  const parking = new Set<Promise<void>>();
  for (const [kind, entry] of Object.entries(opts.handlers ?? {})) runners.set(kind, toRunner(kind, entry));
  for (const [kind, cfg] of Object.entries(opts.httpWorkers ?? {})) {
    if (runners.has(kind)) {
      throw new ValidationError(`kind ${kind} has both a handler and an HTTP worker; keep one`);
    }
    runners.set(
      kind,
      createHttpRunner(kind, cfg, {
        engine,
        logger,
        outcomeRetryMs: outcomeRetryBudget(rescueAfter, heartbeatInterval),
        onCallbackRegistered: (job) => metrics?.job(job.queue, job.kind).callbackRegistered.inc(),
        onParking: (p) => {
          parking.add(p);
          p.finally(() => parking.delete(p));
        },
      }),
    );
  }
  for (const [kind, r] of ext.runners ?? []) {
    if (runners.has(kind)) {
      throw new ValidationError(`kind ${kind} has both a handler and an HTTP worker; keep one`);
    }
    runners.set(kind, r);
  }
  const policies = kindPolicies(runners);
  const callbackTimeoutsMs: Record<string, number> = {};
  for (const [kind, r] of runners) if (r.callbackTimeout) callbackTimeoutsMs[kind] = r.callbackTimeout;

  metrics?.knowKinds(runners.keys());
  metrics?.knowQueues(Object.keys(opts.queues));
  const inFlight = new Map<number, InFlight>();
  const waiters = new CallbackWaiters();
  const outcomeRetryMs = outcomeRetryBudget(rescueAfter, heartbeatInterval);
  // Completer and executor need each other: a result PostgreSQL refuses fails its attempt.
  const completer: Completer = new Completer(engine, logger, {
    deleteRows: retention.completed === 0,
    retryBudgetMs: outcomeRetryMs,
    // fail() reads only the id and the lease of the job; the event carries the job as it ends up.
    unstorable: (c, reason) =>
      fail({ id: c.id, lease: c.lease } as Job, `result cannot be stored: ${reason}`, true, undefined, deps),
    statementTimer: metrics?.f.svc_completion_batch_duration_seconds.with(),
  });
  const deps: ExecutorDeps = {
    engine,
    runners,
    completer,
    waiters,
    logger,
    on,
    pollInterval,
    outcomeRetryMs,
    jobMetrics: metrics ? (job) => metrics.job(job.queue, job.kind) : () => NOOP_JOB,
    // Span names carry the kind only when this worker runs it (a bounded set).
    traceKind: opts.tracing === false ? null : (job) => (runners.has(job.kind) ? job.kind : OTHER),
  };
  const dispatchers = new Map<string, Dispatcher>();
  for (const [queue, cfg] of Object.entries(opts.queues)) {
    dispatchers.set(
      queue,
      new Dispatcher(
        queue,
        cfg,
        engine,
        deps,
        inFlight,
        id,
        policies,
        pollInterval,
        logger,
        callbackTimeoutsMs,
        completer,
        metrics?.f.svc_claim_duration_seconds.with(metrics.queueLabel(queue)),
      ),
    );
  }

  let started = false;
  let shuttingDown = false;
  let notifier: Notifier = pollingNotifier();
  const stops: (() => Promise<void>)[] = [];

  const election = new LeaderElection(
    driver.leaderLock(names.leaderLockKey),
    logger,
    (leader) => {
      logger.info(`svc: runtime ${id} ${leader ? "is now the leader" : "is no longer the leader"}`);
      emit(on, logger, "leader", leader);
      heartbeat.poke();
    },
    { db, names, id, key: names.leaderLockKey, ttlMs: leaderTtl },
  );
  // The leader's duties go through the lock's fenced connection (src/worker/leader.ts): an engine of
  // their own over it.
  const leaderEngine = new RoutedEngine(election.fenced, names, {
    liveWithinMs: 3 * heartbeatInterval,
    engines: opts.engines,
  });
  const maintenance = new MaintenanceLoop(
    { engine: leaderEngine, logger, on, rescueAfter, retention, parkAfter, metrics },
    election,
    maintenanceInterval,
    electionInterval,
    [cronDuty(leaderEngine.cron, maintenanceInterval), ...(ext.duties ?? [])],
  );

  const localReadiness = (): boolean =>
    started && !shuttingDown && heartbeat.lastOk && [...dispatchers.values()].every((d) => d.alive()) &&
    maintenance.alive();

  const heartbeat = new HeartbeatLoop(
    engine,
    () => [
      ...[...inFlight.values()].map((f) => ({ id: f.job.id, lease: f.job.lease })),
      ...[...dispatchers.values()].flatMap((d) => d.held()),
    ],
    () => ({
      id,
      hostname: hostname(),
      pid: pid(),
      queues: [...dispatchers.keys()],
      engines: engine.engines,
      ready: localReadiness(),
      leader: election.isLeader,
      health: { in_flight: inFlight.size, listening: notifier.listening, rescue_after_ms: rescueAfter },
    }),
    heartbeatInterval,
    logger,
  );

  const worker: Worker = {
    id,
    get isLeader() {
      return election.isLeader;
    },
    async start() {
      if (started) throw new Error("worker already started");
      const version = await connectWithin(() => readSchemaVersion(db, names), {
        timeoutMs: connectTimeout,
        target: poolTarget(driver.sql),
        fix: "databaseUrl / DATABASE_URL (or raise connectTimeout)",
        // A pool of our own stops retrying; a caller's client or driver is the caller's to close.
        end: async () => {
          if (ownsPool) await driver.sql?.end({ timeout: 0 });
        },
      });
      if (version === null || version < EXPECTED_SCHEMA_VERSION) {
        throw new SchemaOutdatedError(version, EXPECTED_SCHEMA_VERSION);
      }
      if (!engine.engines.includes("queue_storage") && (await engine.transition()) === "active") {
        throw new ValidationError(
          "createWorker: this worker executes only the canonical storage engine, and the storage transition of " +
            "this database is finished (active): run it with both engines (the default)",
        );
      }
      await engine.mode(); // a worker of only queue storage on a canonical database is refused here
      if (cronDefs.length) await engine.cron.upsert(cronDefs, id);
      for (const [kind, cfg] of Object.entries(opts.httpWorkers ?? {})) {
        if (!cfg.hmacSecret) {
          logger.warn(
            `svc: HTTP worker ${kind} has no hmacSecret: its callback URLs carry no signature, so a receiver ` +
              `that checks signatures refuses them (401) and its jobs wait out their callback timeout; set ` +
              `hmacSecret to the receiver's secret (or run the receiver --unsigned on a trusted network)`,
          );
        }
      }
      if (metrics) {
        stops.push(workerGauges(metrics, engine, names.schema, dispatchers, () => election.isLeader));
      }
      if (healthAddr) {
        const listener = await startHealthListener(
          healthAddr,
          () => worker.healthCheck(),
          metrics ? () => metrics.registry.text() : undefined,
        );
        stops.push(() => listener.close());
        logger.info(`svc: health listener on ${listener.addr.hostname}:${listener.addr.port}`);
      }
      const claimers = [...dispatchers.values()].reduce((a, d) => a + d.claimers, 0);
      if (maxConnections < claimers + 5) {
        logger.warn(
          `svc: maxConnections ${maxConnections} is below the guideline sum(claimers) + 5 = ${
            claimers + 5
          }; ` +
            `raise maxConnections to leave room for handlers, heartbeats and admin queries`,
        );
      }
      if (opts.listen !== false) {
        notifier = listenNotifier(driver, logger);
        await notifier.subscribe(names.jobsChannel, (queue) => dispatchers.get(queue)?.wake());
        await notifier.subscribe(
          names.cancelChannel,
          (jobId) => inFlight.get(Number(jobId))?.abort("cancelled"),
        );
        await notifier.subscribe(names.callbacksChannel, (cb) => waiters.wake(cb));
        await notifier.subscribe(names.storageChannel, () => engine.refresh());
      }
      started = true;
      await heartbeat.beat();
      heartbeat.start();
      dispatchers.forEach((d) => d.start());
      maintenance.start();
      heartbeat.poke(); // report ready now that the loops run, not one heartbeat interval later
      for (const hook of ext.onStart ?? []) stops.push(await hook(worker));
      logger.info(`svc: worker ${id} started on queues ${[...dispatchers.keys()].join(", ")}`);
    },
    async shutdown(drainTimeout = 30_000) {
      if (!started || shuttingDown) return;
      shuttingDown = true;
      heartbeat.poke();
      await Promise.all([...dispatchers.values()].map((d) => d.stop()));
      const until = Date.now() + drainTimeout;
      while (inFlight.size > 0 && Date.now() < until) {
        await Promise.race([
          Promise.allSettled([...inFlight.values()].map((f) => f.done)),
          new Promise((r) => setTimeout(r, Math.max(0, until - Date.now()))),
        ]);
      }
      const rest = [...inFlight.values()];
      if (rest.length) {
        logger.warn(`svc: aborting ${rest.length} handlers still running after the drain timeout`);
      }
      rest.forEach((f) => f.abort("shutdown"));
      await Promise.allSettled(rest.map((f) => f.done));
      await completer.drain();
      await Promise.allSettled([...parking]);
      await maintenance.stop();
      await heartbeat.stop();
      for (const stop of stops.reverse()) await stop().catch(() => {});
      await engine.deleteRuntime(id).catch(() => {});
      await notifier.close();
      if (ownsPool) await driver.close();
      logger.info(`svc: worker ${id} stopped`);
    },
    async healthCheck() {
      let connected = false;
      let version: number | null = null;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        version = await Promise.race([
          readSchemaVersion(db, names),
          new Promise<never>((_, rej) => timer = setTimeout(() => rej(new Error("timeout")), 2000)),
        ]);
        connected = true;
      } catch {
        /* unreachable */
      } finally {
        clearTimeout(timer);
      }
      const r: ReadinessReport = {
        ready: false,
        postgres_connected: connected,
        schema_version: version,
        expected_schema_version: EXPECTED_SCHEMA_VERSION,
        schema_compatible: version !== null && version >= EXPECTED_SCHEMA_VERSION,
        poll_loop_alive: started && [...dispatchers.values()].every((d) => d.alive()),
        heartbeat_alive: started && heartbeat.alive(),
        maintenance_alive: started && maintenance.alive(),
        shutting_down: shuttingDown,
        leader: election.isLeader,
      };
      r.ready = r.postgres_connected && r.schema_compatible && r.poll_loop_alive && r.heartbeat_alive &&
        r.maintenance_alive && !r.shutting_down;
      return r;
    },
  };
  return worker;
}

/** Most retry delays sent for a kind with a backoff of its own (later attempts repeat the last one). */
const MAX_DELAYS = 100;

/**
 * The retry policy and deadline of each kind with settings of its own, as claims store them with the
 * attempt. A kind's own backoff is evaluated for each attempt number at every claim (so that a backoff
 * with jitter stays random); the default backoff is computed by the database.
 */
export function kindPolicies(runners: Map<string, KindRunner>): () => Record<string, KindPolicy> {
  return () => {
    const out: Record<string, KindPolicy> = {};
    for (const [kind, r] of runners) {
      const p: KindPolicy = {};
      if (r.maxAttempts !== undefined) p.maxAttempts = r.maxAttempts;
      if (r.timeout !== undefined) p.timeoutMs = Math.round(r.timeout);
      if (r.backoff !== defaultBackoff) {
        const n = Math.min(r.maxAttempts ?? 25, MAX_DELAYS);
        p.delaysMs = Array.from({ length: n }, (_, i) => {
          const ms = r.backoff(i + 1);
          return Number.isFinite(ms) && ms >= 0 ? Math.round(ms) : defaultBackoff(i + 1);
        });
      }
      if (Object.keys(p).length > 0) out[kind] = p;
    }
    return out;
  };
}

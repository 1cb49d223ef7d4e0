/**
 * `createWorker`: the application process. Owns one dispatcher per queue, the heartbeat loop, the
 * maintenance loop (elected leader), the notifier, and their lifecycle from `start` to `shutdown`.
 */
import { connect, connectWithin, poolTarget } from "../db/connection.ts";
import { postgresDriver } from "../db/driver.ts";
import { type Client, createClient } from "../client/client.ts";
import { EXPECTED_SCHEMA_VERSION, readSchemaVersion, schemaCompatible } from "../db/schema_version.ts";
import { SchemaOutdatedError, SvcError, ValidationError } from "../errors.ts";
import { env, hostname, pid } from "../runtime/runtime.ts";
import type { Job, Logger, ReadinessReport } from "../types.ts";
import { RoutedEngine } from "../storage/routed.ts";
import { Dispatcher } from "./dispatcher.ts";
import { type ExecutorDeps, fail, type InFlight } from "./executor.ts";
import { Completer } from "./completer.ts";
import { CallbackWaiters } from "./callback_waiters.ts";
import { HeartbeatLoop } from "./heartbeat.ts";
import { LeaderElection } from "./leader.ts";
import { MaintenanceLoop } from "./maintenance/maintenance.ts";
import { listenNotifier, type Notifier, pollingNotifier } from "./notifier.ts";
import { emit } from "./events.ts";
import { cronDuty } from "./maintenance/cron.ts";
import { startHealthListener } from "./health_listener.ts";
import { resolveWorkerOptions, type WorkerOptions } from "./options.ts";
import { buildRunners } from "./runners.ts";
import { NOOP_JOB, OTHER, svcMetrics } from "../metrics/svc_metrics.ts";
import { workerGauges } from "../metrics/gauges.ts";

export type { QueueConfig } from "./dispatcher.ts";
export type { WorkerOptions } from "./options.ts";

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

/** Creates a worker; nothing connects before `start()`. */
export function createWorker(opts: WorkerOptions): Worker {
  const {
    logger,
    on,
    pollInterval,
    heartbeatInterval,
    rescueAfter,
    electionInterval,
    leaderTtl,
    maintenanceInterval,
    retention,
    parkAfter,
    maxConnections,
    connectTimeout,
    outcomeRetryMs,
    cronDefs,
    healthAddr,
  } = resolveWorkerOptions(opts);

  const { client, ownsPool } = openClient(opts, heartbeatInterval, maxConnections);
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
  /** Parks of HTTP attempts still being written (their slots are free already); shutdown waits for them. */
  const parking = new Set<Promise<void>>();
  const { runners, policies, callbackTimeoutsMs } = buildRunners(
    opts.handlers ?? {},
    opts.httpWorkers ?? {},
    {
      engine,
      logger,
      outcomeRetryMs,
      onCallbackRegistered: (job) => metrics?.job(job.queue, job.kind).callbackRegistered.inc(),
      onParking: (p) => {
        parking.add(p);
        p.finally(() => parking.delete(p));
      },
    },
  );
  metrics?.knowKinds(runners.keys());
  metrics?.knowQueues(Object.keys(opts.queues));
  const inFlight = new Map<number, InFlight>();
  const waiters = new CallbackWaiters();
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
      new Dispatcher(queue, cfg, {
        deps,
        inFlight,
        runtimeId: id,
        policies,
        callbackTimeoutsMs,
        claimTimer: metrics?.f.svc_claim_duration_seconds.with(metrics.queueLabel(queue)),
      }),
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
    [cronDuty(leaderEngine.cron, maintenanceInterval)],
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
      if (started) throw new SvcError("worker already started: call start() once", "invalid_state");
      const version = await connectWithin(() => readSchemaVersion(db, names), {
        timeoutMs: connectTimeout,
        target: poolTarget(driver.sql),
        fix: "databaseUrl / DATABASE_URL (or raise connectTimeout)",
        // A pool of our own stops retrying; a caller's client or driver is the caller's to close.
        end: async () => {
          if (ownsPool) await driver.sql?.end({ timeout: 0 });
        },
      });
      if (!schemaCompatible(version)) {
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
      warnAtStart(opts, maxConnections, dispatchers, logger);
      if (opts.listen !== false) {
        notifier = listenNotifier(driver, logger);
        await notifier.subscribe(names.jobsChannel, (queue) => dispatchers.get(queue)?.wake());
        await notifier.subscribe(
          names.abortChannel,
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
      logger.info(`svc: worker ${id} started on queues ${[...dispatchers.keys()].join(", ")}`);
    },
    async shutdown(drainTimeout = 30_000) {
      if (!started || shuttingDown) return;
      shuttingDown = true;
      heartbeat.poke();
      await Promise.all([...dispatchers.values()].map((d) => d.stop()));
      await drainInFlight(inFlight, drainTimeout, logger);
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
        schema_compatible: schemaCompatible(version),
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

/** The worker's client: the caller's, one over the caller's driver, or one with a pool of its own. */
function openClient(
  opts: WorkerOptions,
  heartbeatInterval: number,
  maxConnections: number,
): { client: Client; ownsPool: boolean } {
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
  return { client, ownsPool };
}

/** Warnings about the configuration, logged once at start: nothing here stops the worker. */
function warnAtStart(
  opts: WorkerOptions,
  maxConnections: number,
  dispatchers: Map<string, Dispatcher>,
  logger: Logger,
): void {
  for (const [kind, cfg] of Object.entries(opts.httpWorkers ?? {})) {
    if (!cfg.hmacSecret) {
      logger.warn(
        `svc: HTTP worker ${kind} has no hmacSecret: its callback URLs carry no signature, so a receiver ` +
          `that checks signatures refuses them (401) and its jobs wait out their callback timeout; set ` +
          `hmacSecret to the receiver's secret (or run the receiver --unsigned on a trusted network)`,
      );
    }
  }
  const claimers = [...dispatchers.values()].reduce((a, d) => a + d.claimers, 0);
  if (maxConnections < claimers + 5) {
    logger.warn(
      `svc: maxConnections ${maxConnections} is below the guideline sum(claimers) + 5 = ${claimers + 5}; ` +
        `raise maxConnections to leave room for handlers, heartbeats and admin queries`,
    );
  }
}

/** Waits for the attempts in flight to settle for up to `drainTimeout` ms, then aborts the rest. */
async function drainInFlight(
  inFlight: Map<number, InFlight>,
  drainTimeout: number,
  logger: Logger,
): Promise<void> {
  const until = Date.now() + drainTimeout;
  while (inFlight.size > 0 && Date.now() < until) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...inFlight.values()].map((f) => f.done)),
      new Promise((r) => timer = setTimeout(r, Math.max(0, until - Date.now()))),
    ]);
    clearTimeout(timer); // a pending timer would keep the process alive after shutdown
  }
  const rest = [...inFlight.values()];
  if (rest.length) {
    logger.warn(`svc: aborting ${rest.length} handlers still running after the drain timeout`);
  }
  rest.forEach((f) => f.abort("shutdown"));
  await Promise.allSettled(rest.map((f) => f.done));
}

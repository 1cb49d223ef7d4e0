/**
 * `createWorker`: the application process. Owns one dispatcher per queue, the heartbeat loop, the
 * maintenance loop (elected leader), the notifier, and their lifecycle from `start` to `shutdown`.
 */
import { connect, connectWithin, poolTarget, type Sql } from "../db/connection.ts";
import { postgresDriver } from "../db/driver.ts";
import { resolvePooler } from "../db/pooler.ts";
import { type Client, createClient } from "../client/client.ts";
import { EXPECTED_SCHEMA_VERSION, readSchemaVersion, schemaCompatible } from "../db/schema_version.ts";
import { assertSqlNotNewer } from "../db/migrate.ts";
import { SchemaOutdatedError, SvcError, ValidationError } from "../errors.ts";
import { env, hostname, pid } from "../platform/platform.ts";
import type { Job, Logger, ReadinessReport } from "../types.ts";
import { RoutedEngine } from "../storage/routed.ts";
import { queueLimits, setQueueLimit } from "../storage/shared/limits.ts";
import { Dispatcher } from "./dispatcher.ts";
import { type ExecutorDeps, fail, type InFlight } from "./executor.ts";
import { Completer } from "./completer.ts";
import { ProgressWriter } from "./progress.ts";
import { CallbackWaiters } from "./callback_waiters.ts";
import { HeartbeatLoop } from "./heartbeat.ts";
import { AbandonedAttempts } from "./abandoned.ts";
import { StuckHandlers } from "./stuck.ts";
import { LeaderElection } from "./leader.ts";
import { MaintenanceLoop } from "./maintenance/maintenance.ts";
import { listenNotifier, type Notifier, pollingNotifier } from "./notifier.ts";
import { emit } from "./events.ts";
import { cronDuty } from "./maintenance/cron.ts";
import { startHealthListener } from "./health_listener.ts";
import { resolveWorkerOptions, type WorkerOptions } from "./options.ts";
import { buildRunners } from "./runners.ts";
import type { AnyTasks, SchemaMap } from "../tasks.ts";
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

/**
 * Creates a worker; nothing connects before `start()`. Its task map is its client's, or
 * `createWorker<Tasks>()`'s (`createWorker<typeof schemas>()` with a map of schemas).
 */
export function createWorker<T extends object = AnyTasks>(opts: WorkerOptions<T>): Worker {
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
    schemas,
    listenUrl,
    stuckGrace,
  } = resolveWorkerOptions(opts);

  const { client, ownsPool } = openClient(opts, heartbeatInterval, maxConnections, schemas);
  const driver = client.driver;
  const db = driver.db;
  // Through a transaction pooler nothing relies on the session: LISTEN comes from listenUrl, or nothing.
  const pooler = opts.pooler ?? driver.pooler ?? "none";
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
  /** Attempts whose outcome could not be written: named by the heartbeat, ended by the leader's rescue. */
  const abandoned = new AbandonedAttempts();
  const abandon = (a: { id: number; lease: number }, reason: string) => abandoned.add(a, reason);
  const { runners, policies, callbackTimeoutsMs } = buildRunners(
    (opts as WorkerOptions<any>).handlers ?? {},
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
      abandon,
    },
    { ...client.schemas, ...schemas },
  );
  metrics?.knowKinds(runners.keys());
  metrics?.knowQueues(Object.keys(opts.queues));
  const inFlight = new Map<number, InFlight>();
  /** Aborted handlers that have not returned (src/worker/stuck.ts), and every slot taken, for shutdown. */
  const stuck = new StuckHandlers(logger);
  const slots = new Set<InFlight>();
  const waiters = new CallbackWaiters();
  const progress = new ProgressWriter((items) => client.engine.writeProgress(items), logger);
  // Completer and executor need each other: a result PostgreSQL refuses fails its attempt.
  const completer: Completer = new Completer(engine, logger, {
    deleteRows: retention.completed === 0,
    retryBudgetMs: outcomeRetryMs,
    abandon,
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
    abandon,
    enqueuer: client,
    keepCompleted: retention.completed !== 0,
    progress: (job, json) => progress.report(job, json),
    jobMetrics: metrics ? (job) => metrics.job(job.queue, job.kind) : () => NOOP_JOB,
    // Span names carry the kind only when this worker runs it (a bounded set).
    traceKind: opts.tracing === false ? null : (job) => (runners.has(job.kind) ? job.kind : OTHER),
    stuck,
    stuckGraceMs: stuckGrace,
    slots,
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
        throttled: metrics
          ? (limit) => metrics.f.svc_limit_throttled_total.with(metrics.queueLabel(queue), limit)
          : undefined,
        heldFresh: (claimedAt) =>
          Date.now() - heartbeat.lastOkAt < stallMs && claimedAt > heartbeat.stalledAt,
      }),
    );
  }

  let started = false;
  let shuttingDown = false;
  let notifier: Notifier = pollingNotifier();
  /** The LISTEN connection's pool when `listenUrl` is given. */
  let listenSql: Sql | null = null;
  const stops: (() => Promise<void>)[] = [];

  const election = new LeaderElection(
    logger,
    (leader) => {
      logger.info(`svc: runtime ${id} ${leader ? "is now the leader" : "is no longer the leader"}`);
      emit(on, logger, "leader", leader);
      heartbeat.poke();
    },
    { db, names, id, ttlMs: leaderTtl },
  );
  // The leader's duties go through the term's fence (src/worker/leader.ts): an engine of their own over it.
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

  // Held jobs start only while this process's heartbeats keep its attempts from being rescued: a process
  // whose last heartbeat is older than rescueAfter minus one interval (stopped with SIGSTOP, or cut off from
  // the database), or that went that long without one since it claimed them, gives them back instead. (A
  // rescueAfter within two heartbeat intervals cannot tell a stall from the gap between beats.)
  const stallMs = Math.max(rescueAfter - heartbeatInterval, 2 * heartbeatInterval);
  const heartbeat = new HeartbeatLoop(
    engine,
    () => [
      // An attempt whose REPEATABLE READ ctx.transaction is open is left alone: a heartbeat of its row
      // (canonical) after the transaction's snapshot would make its completion a serialization failure.
      ...[...inFlight.values()].filter((f) => f.heartbeats()).map((f) => ({
        id: f.job.id,
        lease: f.job.lease,
      })),
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
      health: {
        in_flight: inFlight.size,
        ...heldReport([...dispatchers.values()].flatMap((d) => d.held()).map((h) => h.id)),
        kinds: [...runners.keys()].sort(),
        listening: notifier.listening,
        rescue_after_ms: rescueAfter,
        ...(abandoned.size ? { abandoned: abandoned.list() } : {}),
        ...(stuck.size ? { stuck_handlers: stuck.list() } : {}),
        ...throttledReport([...dispatchers.values()]),
      },
    }),
    heartbeatInterval,
    logger,
    () => abandoned.size ? abandoned.prune(engine) : Promise.resolve(),
    stallMs,
  );

  const worker: Worker = {
    id,
    get isLeader() {
      return election.isLeader;
    },
    async start() {
      if (started) throw new SvcError("worker already started: call start() once", "invalid_state");
      // The statements before the loops start, retried as a whole while the server refuses, restarts or
      // closes the connection under one of them (until connectTimeout); any other error is final.
      const preflight = async () => {
        const version = await readSchemaVersion(db, names);
        if (!schemaCompatible(version)) {
          throw new SchemaOutdatedError(version, EXPECTED_SCHEMA_VERSION);
        }
        // The functions this worker calls must be its own library's or an older one's (ADR 017).
        await assertSqlNotNewer(db, names);
        if (!engine.engines.includes("queue_storage") && (await engine.transition()) === "active") {
          throw new ValidationError(
            "createWorker: this worker executes only the canonical storage engine, and the storage transition of " +
              "this database is finished (active): run it with both engines (the default)",
          );
        }
        await engine.mode(); // a worker of only queue storage on a canonical database is refused here
        if (cronDefs.length) await engine.cron.upsert(cronDefs, id);
        // A queue's `limit` option seeds its limits row when it has none; the stored row wins.
        for (const [queue, cfg] of Object.entries(opts.queues)) {
          if (cfg.limit) await setQueueLimit(db, names, queue, cfg.limit, id, true);
        }
      };
      await connectWithin(preflight, {
        timeoutMs: connectTimeout,
        target: poolTarget(driver.sql),
        fix: "databaseUrl / DATABASE_URL (or raise connectTimeout)",
        // A pool of our own stops retrying; a caller's client or driver is the caller's to close.
        end: async () => {
          if (ownsPool) await driver.sql?.end({ timeout: 0 });
        },
      });
      // Orphaned attempts pin their ring slot until rescued: a ring that turns over faster than rescueAfter
      // runs short of slots after a crash.
      const qs =
        engine instanceof RoutedEngine && (await engine.mode().catch(() => "canonical")) !== "canonical"
          ? await engine.queueStorage().catch(() => null)
          : null;
      if (qs && qs.ringSpanMs(retention.completed) <= 2 * rescueAfter) {
        logger.warn(
          `svc: the queue-storage ring turns over in ${
            Math.round(qs.ringSpanMs(retention.completed) / 1000)
          } s ` +
            `(slots - 2 times the rotation interval), not well above rescueAfter (${
              rescueAfter / 1000
            } s): a ` +
            `killed worker's attempts pin their slots until rescued, so the ring can run short of slots; ` +
            `migrate with more slots or a longer rotation interval, or lower rescueAfter`,
        );
      }
      if (metrics) {
        stops.push(
          workerGauges(
            metrics,
            engine,
            names.schema,
            dispatchers,
            () => election.isLeader,
            () => stuck.byQueue(),
            () => queueLimits(db, names),
          ),
        );
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
        if (listenUrl) {
          listenSql = connect(listenUrl, { max: 1, applicationName: "svc-worker-listen" });
          notifier = listenNotifier(postgresDriver(listenSql), logger);
        } else if (pooler === "transaction") {
          logger.info(
            `svc: the database URL goes through a transaction pooler, where LISTEN does not work: the claim ` +
              `loops poll every ${pollInterval} ms (give listenUrl a direct URL for instant wake-ups)`,
          );
        } else notifier = listenNotifier(driver, logger);
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
      await waitForHandlers(slots, stuck, stuckGrace, logger);
      await completer.drain();
      await progress.close();
      await Promise.allSettled([...parking]);
      await maintenance.stop();
      await heartbeat.stop();
      for (const stop of stops.reverse()) await stop().catch(() => {});
      await engine.deleteRuntime(id).catch(() => {});
      await notifier.close();
      await listenSql?.end({ timeout: 5 }).catch(() => {});
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
        pooler,
        listening: notifier.listening,
      };
      r.ready = r.postgres_connected && r.schema_compatible && r.poll_loop_alive && r.heartbeat_alive &&
        r.maintenance_alive && !r.shutting_down;
      return r;
    },
  };
  return worker;
}

/**
 * The worker's client: the caller's, one over the caller's driver, or one with a pool of its own (with the
 * worker's schemas, so that `ctx.enqueue` validates with them).
 */
function openClient(
  opts: WorkerOptions<any>,
  heartbeatInterval: number,
  maxConnections: number,
  schemas: SchemaMap,
): { client: Client; ownsPool: boolean } {
  let client: Client;
  let ownsPool = false;
  if (opts.client) {
    client = opts.client;
  } else if (opts.driver) {
    client = createClient<AnyTasks>({
      driver: opts.driver,
      schema: opts.schema,
      heartbeatInterval,
      metrics: opts.metrics !== false,
      schemas,
    });
  } else {
    const url = opts.databaseUrl ?? env("DATABASE_URL");
    if (!url) {
      throw new ValidationError("createWorker: no database URL: pass databaseUrl or set DATABASE_URL");
    }
    // LISTEN opens its own connection on top of this pool (src/db/driver.ts).
    const pooler = resolvePooler(url, opts.pooler).mode;
    const sql = connect(url, {
      max: maxConnections,
      applicationName: "svc-worker",
      prepare: pooler !== "transaction",
    });
    client = createClient<AnyTasks>({
      driver: postgresDriver(sql, { owned: true, pooler }),
      schema: opts.schema,
      heartbeatInterval,
      metrics: opts.metrics !== false,
      schemas,
    });
    ownsPool = true;
  }
  return { client, ownsPool };
}

/** Warnings about the configuration, logged once at start: nothing here stops the worker. */
function warnAtStart(
  opts: WorkerOptions<any>,
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

/**
 * After the drain: aborted handlers that have not returned keep their slots; shutdown waits up to the stuck
 * grace for them, then goes on, naming those still running (an orchestrator's termination grace holds).
 */
async function waitForHandlers(
  slots: Set<InFlight>,
  stuck: StuckHandlers,
  graceMs: number,
  logger: Logger,
): Promise<void> {
  if (slots.size === 0) return;
  await StuckHandlers.settleWithin([...slots].map((s) => s.released), graceMs);
  if (slots.size === 0) return;
  const named = stuck.list().map((h) => `job ${h.job_id} (${h.kind})`);
  logger.warn(
    `svc: shutting down with ${slots.size} handler(s) that did not return after their abort` +
      (named.length ? `: ${named.join(", ")}` : ""),
  );
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

/** Most held job ids a heartbeat names (the count is always whole). */
export const HELD_IDS_MAX = 500;

/**
 * The jobs this process holds claimed and not started (prefetched): their state is `running` like the
 * started ones, so the UI tells them apart by this report. Nothing when there are none.
 */
export function heldReport(ids: number[]): { held?: number; held_jobs?: number[] } {
  return ids.length ? { held: ids.length, held_jobs: ids.slice(0, HELD_IDS_MAX) } : {};
}

/** The queues whose last claim a limit cut short, for the heartbeat (nothing when there are none). */
function throttledReport(
  ds: Dispatcher[],
): { throttled?: { queue: string; limit: string; since: string }[] } {
  const list = ds.map((d) => d.throttled()).filter((t) => t !== null);
  return list.length ? { throttled: list } : {};
}

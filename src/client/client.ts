/**
 * `createClient`: producers, admin tools and external systems. Enqueue (single, many, transactional),
 * read, cancel, retry, pause/resume, external completion, health and migrations.
 */
import { connect, type Db, ping, type Sql } from "../db/connection.ts";
import { type Driver, postgresDriver } from "../db/driver.ts";
import { deadlineDriver } from "./first_connection.ts";
import { type PoolerMode, resolvePooler } from "../db/pooler.ts";
import { type AdminLimits, guardDb } from "../db/admin_guard.ts";
import { DEFAULT_SCHEMA, type SchemaNames, schemaNames } from "../db/names.ts";
import { migrate as runMigrations, type MigrateOptions, type MigrateResult } from "../db/migrate.ts";
import { EXPECTED_SCHEMA_VERSION, readSchemaVersion, schemaCompatible } from "../db/schema_version.ts";
import { clusterHealthRow } from "../storage/shared/sql_api.ts";
import type { CallbackRecord, JobFilter } from "../storage/engine.ts";
import {
  type StepResult,
  type StorageCommand,
  type StorageStatus,
  storageStatus,
  storageStep,
} from "../storage/shared/transition.ts";
import { RoutedEngine } from "../storage/routed.ts";
import { queueLimits, resetQueueLimit, setQueueLimit } from "../storage/shared/limits.ts";
import type {
  ClusterHealth,
  EnqueuedJobOf,
  EnqueueItem,
  EnqueueOptions,
  Job,
  JobPage,
  KindOptions,
  KindOptionsMap,
  ListJobsOptions,
  QueueInfo,
  QueueLimit,
  QueueLimitInfo,
  RuntimeInfo,
} from "../types.ts";
import { QueueNotFoundError, UniqueConflictError, ValidationError } from "../errors.ts";
import { checkLimitKey, normalizeEnqueue, validateQueueName } from "./enqueue_input.ts";
import { type CallbackResult, resolveExternal } from "./external.ts";
import { env } from "../platform/platform.ts";
import { checkJobCursor, checkText } from "../validation.ts";
import { type CronMethods, cronMethods } from "./cron.ts";
import { svcMetrics } from "../metrics/svc_metrics.ts";
import { activeTraceparent } from "../metrics/tracing.ts";
import {
  type AnyTasks,
  argsValidationError,
  checkArgs,
  checkSchemaMap,
  type EnqueueRest,
  type SchemaMap,
  type TaskInput,
  type TaskKind,
  type TaskSchemas,
} from "../tasks.ts";

/**
 * Options of `createClient`. `T` is the task map (`createClient<Tasks>()`); `schemas` are checked against
 * it.
 */
export interface ClientOptions<T extends object = AnyTasks> {
  /** Postgres URL; defaults to env DATABASE_URL. */
  databaseUrl?: string;
  /** A postgres.js pool of your own (the client then never closes it). */
  sql?: Sql;
  /** A driver of your own (`src/db/driver.ts`; the client then never closes it). */
  driver?: Driver;
  /** Shared pool size (default 10). */
  maxConnections?: number;
  /** Postgres schema (default `svc`). */
  schema?: string;
  /**
   * Seconds to wait for the first connection of the client's own pool (default 10): a call made before
   * any connection succeeded rejects with a ConnectTimeoutError after this long, also when the address
   * answers but is not PostgreSQL.
   */
  connectTimeout?: number;
  /**
   * `"transaction"` when `databaseUrl` goes through a transaction pooler (PgBouncer in transaction mode,
   * Supavisor, Neon's pooled endpoint, RDS Proxy): no named prepared statements or other session state
   * (docs/guide/poolers.md). Default: env SERVICE_POOLER, else recognised from the URL's host or port, else
   * `"none"`. With `sql`, create that pool with `prepare: false` yourself.
   */
  pooler?: PoolerMode;
  /** Heartbeat interval the workers use, for counting live runtimes (default 30 000 ms). */
  heartbeatInterval?: number;
  /**
   * Metrics of enqueues and cancels (default true; docs/reference/metrics.md). Kinds that no worker of this
   * process runs are labelled `other`, unless listed in `metricsKinds`.
   */
  metrics?: boolean;
  /** Kinds that get a metric label of their own in a process that runs no worker of them. */
  metricsKinds?: string[];
  /**
   * Args schemas by kind, any Standard Schema validator (zod, valibot, arktype...): `enqueue` validates a
   * kind's args with it and refuses invalid ones with a `ValidationError` naming each path. A worker that
   * shares this client validates with them too, before the handler. Without a task map, the client's
   * types come from them.
   */
  schemas?: TaskSchemas<T>;
  /**
   * Options per job kind, applied at enqueue: `limitKey(args)` gives the limit key of a job whose enqueue
   * names none (`{ charge: { limitKey: (a) => a.accountId } }`). A worker that shares this client
   * (`createWorker({ client })`) applies them to `ctx.enqueue` too.
   */
  kinds?: KindOptionsMap<T>;
  /**
   * @internal Bounds on the admin reads and changes of `svc serve` and the CLI (statement timeout,
   * cancellation, 503 `busy`): `src/db/admin_guard.ts`.
   */
  adminLimits?: AdminLimits;
}

/**
 * `enqueue` and `enqueueMany` checked against a task map `T`: a kind must be one of its kinds, and args
 * its args type (a schema's input). What `client.transaction` and a handler's `ctx` offer.
 */
export interface Enqueuer<T extends object = AnyTasks> {
  enqueue<K extends TaskKind<T>>(
    kind: K,
    ...rest: EnqueueRest<TaskInput<T[K]>, Omit<EnqueueOptions, "tx">>
  ): Promise<EnqueuedJobOf<T[K]>>;
  enqueueMany(items: EnqueueItem<T>[]): Promise<Job[]>;
}

/** What `client.transaction` hands to its callback. */
export interface ClientTransaction<T extends object = AnyTasks> extends Enqueuer<T> {
  /** The driver's transaction: run your own statements in it (postgres.js `tx`, or your driver's own). */
  sql: any;
  /** The same transaction as a `Db` (`query(text, params)`), whatever the driver. */
  db: Db;
}

/** The client (its cron methods are in `./cron.ts`). `T` is its task map. */
export interface Client<T extends object = AnyTasks> extends CronMethods {
  readonly schema: string;
  /** The args schemas of `ClientOptions.schemas`, by kind (empty without). */
  readonly schemas: Readonly<SchemaMap>;
  /** The shared postgres.js pool (throws with a driver of your own that has none: use `db`). */
  readonly sql: Sql;
  /** The driver: SQL (`db`), LISTEN, whether it goes through a pooler. */
  readonly driver: Driver;
  /** SQL through the driver: `query(text, params)`, `exec(script)`, `begin(fn)`. */
  readonly db: Db;
  /** @internal storage engine used by the worker and the HTTP surfaces. */
  readonly engine: RoutedEngine;
  /** @internal derived names of the schema. */
  readonly names: SchemaNames;
  /** Applies missing migrations (idempotent; also `svc migrate`). `engine` etc. apply to a new database. */
  migrate(opts?: MigrateOptions): Promise<MigrateResult>;
  /** Current and expected schema version. */
  schemaStatus(): Promise<{ current: number | null; expected: number }>;
  /** Enqueues one job; `opts.tx` joins a transaction of your own. */
  enqueue<K extends TaskKind<T>>(
    kind: K,
    ...rest: EnqueueRest<TaskInput<T[K]>, EnqueueOptions>
  ): Promise<EnqueuedJobOf<T[K]>>;
  /** Enqueues many jobs in one statement (all or none); `opts.tx` joins a transaction of your own. */
  enqueueMany(items: EnqueueItem<T>[], opts?: { tx?: unknown }): Promise<Job[]>;
  /** Runs `fn` in a transaction: its enqueues and its own statements commit or roll back together. */
  transaction<R>(fn: (tx: ClientTransaction<T>) => Promise<R>): Promise<R>;
  getJob(id: number): Promise<Job | null>;
  listJobs(opts?: ListJobsOptions): Promise<JobPage>;
  cancel(id: number): Promise<Job>;
  retry(id: number): Promise<Job>;
  /**
   * Deletes a finished job (completed, failed or cancelled) and its callbacks; returns the job as it was.
   * A job that has not finished is refused (InvalidStateError): cancel it first.
   */
  deleteJob(id: number): Promise<Job>;
  /** Cancels every unfinished job the filter matches; with `dryRun` only counts them. */
  bulkCancel(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number>;
  /** Retries every finished job the filter matches; with `dryRun` only counts them. */
  bulkRetry(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number>;
  /**
   * Running jobs, prefetched ones included (no `attemptedAt` yet), at most `limit` (1..1000, default 200):
   * the longest running first.
   */
  runningJobs(limit?: number): Promise<Job[]>;
  /**
   * Pauses a queue: workers stop claiming its jobs. An unknown queue (no jobs, never paused, no live
   * worker serving it) is refused with a QueueNotFoundError unless `create` (pausing ahead of its jobs).
   */
  pauseQueue(name: string, opts?: { create?: boolean }): Promise<void>;
  /** Resumes a queue; an unknown one is refused like `pauseQueue`'s unless `create`. */
  resumeQueue(name: string, opts?: { create?: boolean }): Promise<void>;
  /**
   * Sets a queue's fleet-wide limits, stored in the database and obeyed by every worker process at its next
   * claim (every kind not given is cleared; `{}` keeps a row without limits, so no worker's option seeds one).
   * `setBy` is recorded with it (default `client`). Throws ValidationError for a bad limit.
   */
  setQueueLimit(name: string, limit: QueueLimit, opts?: { setBy?: string }): Promise<QueueLimitInfo>;
  /** Deletes a queue's limits row (a worker's `limit` option may seed one again); whether there was one. */
  resetQueueLimit(name: string): Promise<boolean>;
  /** The stored limits of every queue that has a row, with their current use. */
  listQueueLimits(): Promise<QueueLimitInfo[]>;
  listQueues(): Promise<QueueInfo[]>;
  listRuntimes(): Promise<RuntimeInfo[]>;
  getCallback(id: string): Promise<CallbackRecord | null>;
  listCallbacks(jobId: number): Promise<CallbackRecord[]>;
  resumeExternal(callbackId: string, payload?: unknown): Promise<CallbackResult>;
  completeExternal(callbackId: string, payload?: unknown): Promise<CallbackResult>;
  failExternal(callbackId: string, error: string, opts?: { retryable?: boolean }): Promise<CallbackResult>;
  heartbeatExternal(callbackId: string, opts: { timeoutSeconds: number }): Promise<CallbackResult>;
  healthCheck(): Promise<ClusterHealth>;
  /** The active storage engine and the storage-transition state (`svc storage status`). */
  storageStatus(): Promise<StorageStatus>;
  /**
   * One step of the storage transition (`svc storage prepare|enter-mixed-transition|finalize|abort`),
   * under the state row's lock, waited for at most `lockTimeoutMs` (default 5 000; then it throws
   * StorageLockTimeoutError naming the sessions that hold it).
   */
  storageStep(command: StorageCommand, opts?: { lockTimeoutMs?: number }): Promise<StepResult>;
  close(): Promise<void>;
}

/**
 * Creates a client. Connections open lazily on first use. `createClient<Tasks>()` types it by a task map;
 * `createClient({ schemas })` without one takes its types from the schemas.
 */
export function createClient<S extends SchemaMap>(opts: ClientOptions<S> & { schemas: S }): Client<S>;
export function createClient<T extends object = AnyTasks>(opts?: ClientOptions<T>): Client<T>;
// Untyped, and what `ReturnType<typeof createClient>` gives.
export function createClient(opts?: ClientOptions): Client;
export function createClient(opts: ClientOptions<any> = {}): Client<any> {
  const schemas = checkSchemaMap("schemas", opts.schemas);
  const names = schemaNames(opts.schema ?? DEFAULT_SCHEMA);
  let driver: Driver;
  if (opts.driver) {
    driver = opts.driver;
  } else if (opts.sql) {
    driver = postgresDriver(opts.sql, { pooler: resolvePooler(undefined, opts.pooler).mode });
  } else {
    const url = opts.databaseUrl ?? env("DATABASE_URL");
    if (!url) throw new ValidationError("no database URL: pass databaseUrl or set DATABASE_URL");
    const connectTimeout = opts.connectTimeout ?? 10;
    if (typeof connectTimeout !== "number" || !Number.isFinite(connectTimeout) || connectTimeout <= 0) {
      throw new ValidationError("connectTimeout must be a positive number of seconds");
    }
    const pooler = resolvePooler(url, opts.pooler).mode;
    // The first connection has a deadline, also against an address that is not PostgreSQL.
    driver = deadlineDriver(
      () =>
        connect(url, { max: opts.maxConnections ?? 10, connectTimeout, prepare: pooler !== "transaction" }),
      connectTimeout * 1000,
      pooler,
    );
  }
  const db = opts.adminLimits ? guardDb(driver.db, opts.adminLimits) : driver.db;
  const heartbeatInterval = opts.heartbeatInterval ?? 30_000;
  const engine = new RoutedEngine(db, names, { liveWithinMs: 3 * heartbeatInterval });

  const metrics = opts.metrics === false ? null : svcMetrics();
  if (opts.metricsKinds) metrics?.knowKinds(opts.metricsKinds);
  const hasSchemas = Object.keys(schemas).length > 0;
  const kinds = checkKinds(opts.kinds);
  /** The items with the limit keys their kinds give (only the items that name none). */
  const withKindKeys = (items: EnqueueItem[]): EnqueueItem[] =>
    items.map((item) => {
      const fn =
        item && item.limitKey == null && typeof item.kind === "string" && Object.hasOwn(kinds, item.kind)
          ? kinds[item.kind].limitKey
          : undefined;
      if (!fn) return item;
      const key = fn((item.args ?? {}) as Record<string, unknown>);
      return key === undefined || key === null
        ? item
        : { ...item, limitKey: checkLimitKey(`kinds.${item.kind}.limitKey(args)`, key) };
    });
  /** The items with their args checked by their kinds' schemas (stored as given). */
  const validated = async (items: EnqueueItem[]): Promise<EnqueueItem[]> => {
    if (!Array.isArray(items)) throw new ValidationError("enqueueMany takes an array of jobs");
    for (const [i, item] of items.entries()) {
      const schema = item && typeof item.kind === "string" && Object.hasOwn(schemas, item.kind)
        ? schemas[item.kind]
        : undefined;
      if (!schema) continue;
      const r = await checkArgs(schema, item.args ?? {});
      if (!r.ok) throw argsValidationError(item.kind, r.issues, items.length > 1 ? `job ${i}: ` : "");
    }
    return items;
  };
  const enqueueVia = async (target: Db, items: EnqueueItem[]): Promise<Job[]> => {
    // Without schemas, no await before the insert (enqueue is on producers' hot path).
    const checked = hasSchemas ? await validated(items) : items;
    const normalized = (kinds === NO_KINDS ? checked : withKindKeys(checked)).map((i) => normalizeEnqueue(i));
    // The producer's span, when it has one, becomes the parent of the jobs' attempt spans.
    const producer = activeTraceparent();
    if (producer) { for (const n of normalized) n.traceContext ??= producer; }
    const jobs = await engine.enqueue(target, normalized);
    // Counted when the statement returns (inside a caller's transaction: whether or not it commits).
    if (metrics) { for (const j of jobs) if (!j.duplicate) metrics.job(j.queue, j.kind).enqueued.inc(); }
    items.forEach((item, i) => {
      if (jobs[i].duplicate && item.unique?.onConflict === "error") {
        throw new UniqueConflictError(jobs[i].id, jobs[i].uniqueKey ?? "");
      }
    });
    return jobs;
  };

  const knownQueue = async (name: string, create = false): Promise<string> => {
    validateQueueName(name);
    if (!create && !(await engine.queueKnown(name, 3 * heartbeatInterval))) {
      throw new QueueNotFoundError(name);
    }
    return name;
  };

  const client: Client = {
    schema: names.schema,
    schemas,
    get sql(): Sql {
      if (!driver.sql) {
        throw new ValidationError(
          `client.sql is the postgres.js pool; the ${driver.name} driver has none: use client.db`,
        );
      }
      return driver.sql;
    },
    driver,
    db,
    engine,
    names,
    migrate: (o) => runMigrations(db, names, o),
    schemaStatus: async () => ({
      current: await readSchemaVersion(db, names),
      expected: EXPECTED_SCHEMA_VERSION,
    }),
    async enqueue(kind, args = {}, o = {}) {
      const { tx, ...rest } = o;
      const [job] = await enqueueVia(tx ? driver.txDb(tx) : db, [{ ...rest, kind, args }]);
      return job;
    },
    enqueueMany: (items, o = {}) => enqueueVia(o.tx ? driver.txDb(o.tx) : db, items),
    transaction: (fn) =>
      driver.transaction((tx, raw) =>
        fn({
          enqueue: async (kind, args = {}, o = {}) => (await enqueueVia(tx, [{ ...o, kind, args }]))[0],
          enqueueMany: (items) => enqueueVia(tx, items),
          sql: raw,
          db: tx,
        })
      ),
    getJob: (id) => engine.getJob(checkId(id)),
    listJobs: async (o = {}) => await engine.listJobs(checkFilter(o)),
    async cancel(id) {
      const job = await engine.cancel(checkId(id));
      metrics?.job(job.queue, job.kind).cancelled.inc();
      return job;
    },
    retry: (id) => engine.retry(checkId(id)),
    deleteJob: (id) => engine.deleteJob(checkId(id)),
    bulkCancel: async (f, o = {}) => await engine.bulkCancel(checkFilter(f), { dryRun: o.dryRun === true }),
    bulkRetry: async (f, o = {}) => await engine.bulkRetry(checkFilter(f), { dryRun: o.dryRun === true }),
    runningJobs: async (limit = 200) => {
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new ValidationError(`limit must be an integer from 1 to 1000, got ${limit}`);
      }
      return await engine.runningJobs(limit);
    },
    async pauseQueue(name, o = {}) {
      await engine.pauseQueue(await knownQueue(name, o.create));
    },
    async resumeQueue(name, o = {}) {
      await engine.resumeQueue(await knownQueue(name, o.create));
    },
    async setQueueLimit(name, limit, o = {}) {
      validateQueueName(name);
      return await setQueueLimit(db, names, name, limit, o.setBy ?? "client");
    },
    async resetQueueLimit(name) {
      validateQueueName(name);
      return await resetQueueLimit(db, names, name);
    },
    listQueueLimits: () => queueLimits(db, names),
    listQueues: () => engine.listQueues(),
    listRuntimes: () => engine.listRuntimes(3 * heartbeatInterval),
    getCallback: (id) => engine.getCallback(id),
    listCallbacks: (jobId) => engine.listCallbacks(jobId),
    resumeExternal: (id, payload) => resolveExternal(engine, id, "resume", { payload }),
    completeExternal: (id, payload) => resolveExternal(engine, id, "complete", { payload }),
    failExternal: (id, error, o = {}) => {
      if (typeof error !== "string") throw new ValidationError("error must be a string");
      return resolveExternal(engine, id, "fail", { error, retryable: o.retryable ?? false });
    },
    heartbeatExternal: (id, o) => {
      const t = o?.timeoutSeconds;
      if (!Number.isInteger(t) || t < 1 || t > 2_592_000) {
        throw new ValidationError("timeoutSeconds must be an integer from 1 to 2592000 (30 days)");
      }
      return resolveExternal(engine, id, "heartbeat", { timeoutSeconds: t });
    },
    healthCheck: () => clusterHealth(db, names, 3 * heartbeatInterval, driver.pooler ?? "none"),
    storageStatus: () => storageStatus(db, names, 3 * heartbeatInterval),
    async storageStep(command, o = {}) {
      const r = await storageStep(db, names, command, 3 * heartbeatInterval, o.lockTimeoutMs ?? 5_000);
      engine.refresh();
      return r;
    },
    ...cronMethods(engine.cron, (kind, args, o) => client.enqueue(kind, args, o)),
    async close() {
      if (!opts.driver) await driver.close();
    },
  };
  return client;
}

/** A client without kind options. */
const NO_KINDS: Readonly<Record<string, KindOptions>> = Object.freeze({});

/** Checks `kinds`: an object of kind: { limitKey? (a function) }. */
function checkKinds(kinds: unknown): Readonly<Record<string, KindOptions>> {
  if (kinds === undefined) return NO_KINDS;
  if (typeof kinds !== "object" || kinds === null || Array.isArray(kinds)) {
    throw new ValidationError("kinds must be an object of kind: { limitKey? }");
  }
  const out: Record<string, KindOptions> = {};
  for (const [kind, o] of Object.entries(kinds as Record<string, unknown>)) {
    if (o === undefined) continue;
    if (typeof o !== "object" || o === null || Array.isArray(o)) {
      throw new ValidationError(`kinds.${kind} must be an object: { limitKey? }`);
    }
    const { limitKey, ...rest } = o as KindOptions & Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length) {
      throw new ValidationError(`kinds.${kind}: unknown option ${unknown.join(", ")} (it takes limitKey)`);
    }
    if (limitKey !== undefined && typeof limitKey !== "function") {
      throw new ValidationError(`kinds.${kind}.limitKey must be a function of the job's args`);
    }
    out[kind] = { limitKey };
  }
  return Object.keys(out).length ? out : NO_KINDS;
}

function checkId(id: number): number {
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new ValidationError(`job id must be a positive integer, got ${id}`);
  }
  return id;
}

/** Refuses filter text PostgreSQL cannot take (NUL, lone surrogates) and cursors no page gave. */
function checkFilter<T extends JobFilter & { tag?: string; q?: string; cursor?: string }>(f: T): T {
  for (const k of ["kind", "queue", "tag", "q"] as const) {
    if (typeof f[k] === "string") checkText(k, f[k]);
  }
  if (f.cursor !== undefined) checkJobCursor(f.cursor);
  return f;
}

/**
 * The `svc health --json` object, answered from the database alone: unreachable and unmigrated here,
 * the rest by the SQL API's `health()` (the one definition, which other languages call too).
 */
async function clusterHealth(
  db: Db,
  names: SchemaNames,
  liveMs: number,
  pooler: PoolerMode,
): Promise<ClusterHealth> {
  const base: ClusterHealth = {
    ready: false,
    postgres: "unreachable",
    schema_version: null,
    expected_schema_version: EXPECTED_SCHEMA_VERSION,
    storage: "unknown",
    storage_transition: "unknown",
    live_runtimes: 0,
    unhealthy_runtimes: 0,
    pooler,
  };
  try {
    await ping(db);
  } catch (e) {
    return {
      ...base,
      reason: `database unreachable (${String((e as Error).message).split("\n")[0]}); ` +
        "check the database URL and that PostgreSQL is running",
    };
  }
  base.postgres = "connected";
  const version = await readSchemaVersion(db, names);
  base.schema_version = version;
  if (!schemaCompatible(version)) {
    return {
      ...base,
      reason: version === null
        ? "svc schema not installed: run `svc migrate`"
        : `schema version ${version} is older than ${EXPECTED_SCHEMA_VERSION}: run \`svc migrate\``,
    };
  }
  const h = await clusterHealthRow(db, names, EXPECTED_SCHEMA_VERSION, liveMs);
  return { ...h, pooler } as unknown as ClusterHealth;
}

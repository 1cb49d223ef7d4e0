/**
 * The `ctx` a handler receives: its abort signal (cancel, deadline, shutdown), in-process sequential
 * callbacks (`registerCallback` / `waitForCallback`, resolved by `client.resumeExternal`), a logger that
 * names the job, `enqueue` for follow-up jobs, `transaction` (the handler's SQL, its follow-ups and the
 * job's completion in one transaction guarded by the run lease; docs/adr/018-job-transactions.md) and
 * `progress`.
 */
import type { WorkerStore } from "../storage/engine.ts";
import type { Job, Logger } from "../types.ts";
import type { AnyTasks } from "../tasks.ts";
import type { ClientTransaction, Enqueuer } from "../client/client.ts";
import type { CallbackWaiters } from "./callback_waiters.ts";
import { Wakeup } from "../timing.ts";
import { jobLogger, silentLogger } from "./logger.ts";
import { InvalidStateError, LeaseLostError, SvcError, ValidationError } from "../errors.ts";
import { checkJsonValue } from "../validation.ts";
import { describeThrown } from "../describe.ts";

/** The isolation level of `ctx.transaction` (PostgreSQL's names). */
export type IsolationLevel = "read committed" | "repeatable read" | "serializable";

/** Options of `ctx.transaction`. */
export interface JobTransactionOptions {
  /**
   * The transaction's isolation level (default `read committed`). Under `repeatable read` and
   * `serializable`, a change of the job that the snapshot cannot see (a cancel, a rescue; on the canonical
   * engine also the worker's own heartbeat of the job row) makes the completion fail with PostgreSQL's
   * serialization error (SQLSTATE 40001), unless the attempt was lost, which is a `LeaseLostError`.
   */
  isolation?: IsolationLevel;
}

/** What `ctx.transaction` hands to its callback: the client's transaction (`sql`, `db`, `enqueue`). */
export type JobTransaction<T extends object = AnyTasks> = ClientTransaction<T>;

/**
 * What a handler gets beside its job. `T`, the worker's task map, types `enqueue`; `R`, the kind's declared
 * result, types what `transaction` completes the job with.
 */
export interface JobContext<T extends object = AnyTasks, R = unknown> extends Enqueuer<T> {
  /** Aborts on cancel, hard deadline and shutdown; `signal.reason` says which. */
  readonly signal: AbortSignal;
  /** Registers a callback for this attempt; returns its id (a UUID) to hand to the external system. */
  registerCallback(opts?: { timeout?: number }): Promise<string>;
  /**
   * Parks the job in `waiting_external` until `client.resumeExternal(id, payload)`, then returns the payload.
   * Rejects when the callback times out, fails, or the job is completed through the HTTP `complete` endpoint.
   */
  waitForCallback(callbackId: string): Promise<unknown>;
  /**
   * The W3C `traceparent` of this attempt's span (a child of the producer's span when it enqueued inside
   * one), to propagate to systems the handler calls; null when there is none.
   */
  readonly traceparent: string | null;
  /**
   * The worker's logger, naming the job: JSON lines carry `job_id`, `kind` and `attempt` fields; text
   * lines start with `job <id> (<kind>, attempt <n>):`.
   */
  readonly logger: Logger;
  /**
   * Runs `fn` in a database transaction that ends by completing this job with the value `fn` returns (its
   * result): the handler's own statements (`tx.sql`, `tx.db`), its follow-up jobs (`tx.enqueue`; and
   * `ctx.enqueue` while the transaction is open) and the completion commit together or not at all. The
   * completion is the transaction's last statement and checks the run lease: when the attempt is no longer
   * current (cancelled, rescued), nothing commits and this rejects with `LeaseLostError`. When `fn` throws,
   * nothing commits and the error comes back to the handler. Once it resolved, the job is completed: what
   * the handler returns or throws afterwards changes nothing. In-process handlers only.
   */
  transaction<V extends R>(
    fn: (tx: JobTransaction<T>) => Promise<V>,
    opts?: JobTransactionOptions,
  ): Promise<V>;
  /**
   * Reports the attempt's progress: any JSON value of at most 4 KB serialized (`ValidationError` above, the
   * stored value unchanged). The latest value wins; it is written at most once a second per job, batched
   * with other jobs' progress, and shown by `GET /api/jobs/:id`, `svc job get` and the admin UI.
   */
  progress(value: unknown): void;
}

/** Serialized size cap of a progress value (bytes of UTF-8 JSON). */
export const PROGRESS_MAX_BYTES = 4096;

/** A progress value checked and serialized (`ValidationError` when it is not JSON or over the cap). */
export function progressJson(value: unknown): string {
  const json = checkJsonValue("progress", value === undefined ? null : value, { exactNumbers: true });
  const bytes = new TextEncoder().encode(json).length;
  if (bytes > PROGRESS_MAX_BYTES) {
    throw new ValidationError(
      `progress is ${bytes} bytes of JSON, over the cap of ${PROGRESS_MAX_BYTES}: report a summary (a count, a percentage)`,
    );
  }
  return json;
}

/**
 * What `ctx.transaction` did, for the executor: the job completed inside it (with its result), the lease
 * found lost, and the transaction still running (the outcome waits for it).
 */
export interface AttemptTx {
  completed: { result: unknown } | null;
  leaseLost: boolean;
  pending: Promise<unknown> | null;
  /**
   * A REPEATABLE READ or SERIALIZABLE transaction is open: the worker leaves the job's row alone meanwhile
   * (canonical heartbeats update it, and an update after the snapshot would fail the completion).
   */
  snapshotOpen: boolean;
}

/** A fresh `AttemptTx`. */
export function attemptTx(): AttemptTx {
  return { completed: null, leaseLost: false, pending: null, snapshotOpen: false };
}

/** What the worker lends a job's context beyond storage. */
export interface JobContextExtras {
  /** The worker's logger (named for the job here). */
  logger?: Logger;
  /** The worker's client (for `enqueue` and `transaction`). */
  enqueuer?: Enqueuer & { transaction?: <X>(fn: (tx: ClientTransaction) => Promise<X>) => Promise<X> };
  /** Whether completed jobs are kept (`retention.completed > 0`). */
  keep?: boolean;
  /** Takes a checked progress value (JSON text) to write. */
  progress?: (job: Job, json: string) => void;
}

/**
 * Why a handler's signal was aborted. `cancelled`: the job was changed under the attempt by someone
 * else: cancelled, or (canonical engine) rescued by the leader (deadline passed, heartbeat stale), which
 * the leader announces on the same NOTIFY channel as a cancel (docs/guide/handlers.md, "The abort signal").
 */
export type AbortReason = "cancelled" | "deadline" | "shutdown";

/** Raised by `waitForCallback` when the callback ends otherwise than by `resumeExternal`. */
export class CallbackEndedError extends SvcError {
  constructor(message: string) {
    super(message, "callback_ended");
    this.name = "CallbackEndedError";
  }
}

const DEFAULT_CALLBACK_TIMEOUT = 3_600_000;

/** What a context asks of its attempt (the executor's attempt itself: no closure per attempt). */
export interface AttemptLink {
  /** The attempt's abort signal, made when first read. */
  signal(): AbortSignal;
  /** Told of each callback registered. */
  callbackRegistered(): void;
  /** Records `ctx.transaction`'s outcome for the executor. */
  readonly tx: AttemptTx;
}

export function createJobContext(
  job: Job,
  link: AttemptLink,
  engine: WorkerStore,
  waiters: CallbackWaiters,
  pollMs: number,
  traceparent: string | null = null,
  /** The same for every attempt of a worker. */
  extras: JobContextExtras = {},
): JobContext {
  return new AttemptContext(job, link, engine, waiters, pollMs, traceparent, extras);
}

/**
 * The context of one attempt. Its functions are made when a handler first reads them (most handlers read
 * none): every attempt made ten closures before, a tenth of what the worker allocated per job. Each is a
 * function of its own, so a handler may take one out of `ctx` (`const { enqueue } = ctx`) and call it alone.
 */
class AttemptContext implements JobContext {
  private readonly state: AttemptTx;
  /** The transaction `ctx.transaction` has open: `ctx.enqueue` joins it. */
  private open: ClientTransaction | null = null;
  private loggerOf: Logger | null = null;
  private fns: Partial<Pick<JobContext, FnName>> | null = null;

  constructor(
    private readonly job: Job,
    private readonly link: AttemptLink,
    private readonly engine: WorkerStore,
    private readonly waiters: CallbackWaiters,
    private readonly pollMs: number,
    readonly traceparent: string | null,
    private readonly extras: JobContextExtras,
  ) {
    this.state = link.tx;
  }

  get signal(): AbortSignal {
    return this.link.signal();
  }

  get logger(): Logger {
    return this.loggerOf ??= jobLogger(this.extras.logger ?? silentLogger, this.job);
  }

  get enqueue(): JobContext["enqueue"] {
    return this.fn("enqueue", () => (kind, ...rest) => {
      noTx(rest[1], "ctx.enqueue");
      return (this.open ?? this.viaClient()).enqueue(kind, ...rest);
    });
  }

  get enqueueMany(): JobContext["enqueueMany"] {
    return this.fn("enqueueMany", () => (items) => {
      for (const item of items ?? []) noTx(item, "ctx.enqueueMany");
      return (this.open ?? this.viaClient()).enqueueMany(items);
    });
  }

  get transaction(): JobContext["transaction"] {
    return this.fn("transaction", () => (fn, opts = {}) => this.runTransaction(fn, opts));
  }

  get progress(): JobContext["progress"] {
    return this.fn("progress", () => (value) => {
      const json = progressJson(value);
      this.extras.progress?.(this.job, json);
    });
  }

  get registerCallback(): JobContext["registerCallback"] {
    return this.fn("registerCallback", () => async (opts = {}) => {
      const timeout = opts.timeout ?? DEFAULT_CALLBACK_TIMEOUT;
      if (!Number.isFinite(timeout) || timeout <= 0) {
        throw new ValidationError("registerCallback: timeout must be > 0 ms");
      }
      const id = await this.engine.registerCallback({
        id: this.job.id,
        lease: this.job.lease,
        timeoutMs: timeout,
        kind: "in_process",
      });
      if (!id) throw new CallbackEndedError(`job ${this.job.id} is no longer running this attempt`);
      this.link.callbackRegistered();
      return id;
    });
  }

  get waitForCallback(): JobContext["waitForCallback"] {
    return this.fn("waitForCallback", () => (callbackId) => this.waitFor(callbackId));
  }

  /** The function `name`, made on first use. */
  private fn<K extends FnName>(name: K, make: () => JobContext[K]): JobContext[K] {
    const fns = this.fns ??= {};
    return (fns[name] ??= make()) as JobContext[K];
  }

  private viaClient(): Enqueuer {
    const enqueuer = this.extras.enqueuer;
    if (!enqueuer) throw new SvcError("ctx.enqueue: this context has no client", "invalid_state");
    return enqueuer;
  }

  private runTransaction<V>(
    fn: (tx: JobTransaction<any>) => Promise<V>,
    opts: JobTransactionOptions,
  ): Promise<V> {
    const { job, engine, extras, state } = this;
    const isolation = opts.isolation ?? "read committed";
    if (!["read committed", "repeatable read", "serializable"].includes(isolation)) {
      return Promise.reject(
        new ValidationError(
          `ctx.transaction: isolation must be "read committed", "repeatable read" or "serializable"`,
        ),
      );
    }
    if (state.completed) {
      return Promise.reject(
        new InvalidStateError(`ctx.transaction: job ${job.id} was already completed by a transaction`),
      );
    }
    if (state.leaseLost) return Promise.reject(new LeaseLostError(job.id, job.lease));
    if (this.open || state.pending) {
      return Promise.reject(
        new InvalidStateError("ctx.transaction: a transaction of this job is already open"),
      );
    }
    const begin = extras.enqueuer?.transaction;
    if (!begin) {
      return Promise.reject(new SvcError("ctx.transaction: this context has no client", "invalid_state"));
    }
    const run = (async () => {
      let value!: Awaited<V>;
      let completing = false;
      try {
        await begin(async (tx) => {
          if (isolation !== "read committed") {
            state.snapshotOpen = true;
            await tx.db.query(`set transaction isolation level ${isolation}`);
          }
          this.open = tx;
          try {
            value = await fn(tx as JobTransaction<any>);
          } finally {
            this.open = null;
          }
          const result = value === undefined ? null : value;
          const resultJson = checkJsonValue("result", result, { exactNumbers: true });
          completing = true;
          const done = await engine.completeIn(
            tx.db,
            { id: job.id, lease: job.lease, result, resultJson, startedAt: job.attemptedAt ?? undefined },
            { keepCompleted: extras.keep ?? true },
          );
          if (!done) throw new LeaseLostError(job.id, job.lease);
        });
      } catch (e) {
        state.snapshotOpen = false;
        if (e instanceof LeaseLostError) {
          state.leaseLost = true;
          throw e;
        }
        // A completion that failed (a serialization failure under REPEATABLE READ, a lost connection)
        // may mean the attempt was lost: asked in a statement of its own, a lost lease is said so.
        if (completing && !(await current(engine, job).catch(() => true))) {
          state.leaseLost = true;
          throw new LeaseLostError(
            job.id,
            job.lease,
            `${new LeaseLostError(job.id, job.lease).message} (${describeThrown(e)})`,
          );
        }
        throw e;
      }
      state.snapshotOpen = false;
      state.completed = { result: value === undefined ? null : value };
      return value;
    })();
    state.pending = run.finally(() => (state.pending = null)).catch(() => {});
    return run;
  }

  private async waitFor(callbackId: string): Promise<unknown> {
    const { job, engine } = this;
    const wake = new Wakeup();
    const off = this.waiters.on(callbackId, () => wake.notify());
    const onAbort = () => wake.notify();
    const sig = this.signal;
    sig.addEventListener("abort", onAbort);
    try {
      await engine.park({ id: job.id, lease: job.lease, callbackId });
      for (;;) {
        if (sig.aborted) throw new CallbackEndedError(`wait aborted: ${sig.reason}`);
        const cb = await engine.getCallback(callbackId);
        if (!cb || cb.jobId !== job.id) {
          throw new CallbackEndedError(`callback ${callbackId} not found for this job`);
        }
        if (cb.state === "completed") {
          if (cb.resolution === "resumed") return cb.payload;
          throw new CallbackEndedError(`job ${job.id} was completed through its callback`);
        }
        if (cb.state === "failed") throw new CallbackEndedError(`callback failed: ${cb.error}`);
        if (cb.state === "expired") throw new CallbackEndedError("callback timed out");
        if (cb.state === "superseded") {
          throw new CallbackEndedError("callback superseded by a later attempt");
        }
        await wake.wait(this.pollMs);
      }
    } finally {
      off();
      sig.removeEventListener("abort", onAbort);
    }
  }
}

/** The context's functions, made on first use. */
type FnName = "enqueue" | "enqueueMany" | "transaction" | "progress" | "registerCallback" | "waitForCallback";

/** Refuses a `tx` option: `ctx.enqueue` joins the handler's `ctx.transaction`, never a transaction of the caller's. */
function noTx(opts: unknown, what: string): void {
  if (opts && typeof opts === "object" && "tx" in opts) {
    throw new ValidationError(
      `${what} takes no tx: use client.enqueue(kind, args, { tx }) for your own transaction`,
    );
  }
}

/** Whether the attempt is still the job's current one (running or parked under this lease). */
async function current(engine: WorkerStore, job: Job): Promise<boolean> {
  const now = await engine.getJob(job.id);
  return !!now && now.lease === job.lease && (now.state === "running" || now.state === "waiting_external");
}

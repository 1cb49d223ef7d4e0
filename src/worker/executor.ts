/**
 * Runs one claimed attempt: builds its context, enforces the deadline, and records the outcome
 * (completed, retryable/failed, snoozed, parked). Every write carries the run lease.
 */
import type { Failure, WorkerStore } from "../storage/engine.ts";
import type { Job, Logger } from "../types.ts";
import { isSnooze, TerminalError } from "../errors.ts";
import type { Completer } from "./completer.ts";
import type { CallbackWaiters } from "./callback_waiters.ts";
import {
  type AbortReason,
  type AttemptLink,
  type AttemptTx,
  attemptTx,
  createJobContext,
  type JobContextExtras,
} from "./job_context.ts";
import { type KindRunner, PARKED } from "./handlers.ts";
import { emit, type WorkerEvents } from "./events.ts";
import type { BatchSink } from "../db/batcher.ts";
import { checkJsonValue, storableText } from "../validation.ts";
import { retryWithin } from "./outcome_retry.ts";
import type { StuckHandlers } from "./stuck.ts";
import { describeThrown, isErrorObject, safeGet, safeInstanceOf } from "../describe.ts";
import type { JobHandles } from "../metrics/svc_metrics.ts";
import type { Client } from "../client/client.ts";
import {
  type AttemptTrace,
  bindAttemptContext,
  endAttemptSpan,
  startAttemptSpan,
  tracerRegistered,
  withContext,
} from "../metrics/tracing.ts";

/** Shared by every dispatcher of a worker. */
export interface ExecutorDeps {
  engine: WorkerStore;
  runners: Map<string, KindRunner>;
  completer: Completer;
  waiters: CallbackWaiters;
  logger: Logger;
  on: WorkerEvents;
  pollInterval: number;
  /** How long a failing outcome write is retried (ms): `outcome_retry.ts`. */
  outcomeRetryMs: number;
  /** Told of an attempt whose outcome could not be written (the heartbeat names it; the leader ends it). */
  abandon?: (attempt: { id: number; lease: number }, reason: string) => void;
  /** The worker's client, behind `ctx.enqueue` and `ctx.transaction` (none: they throw). */
  enqueuer?: Pick<Client, "enqueue" | "enqueueMany" | "transaction">;
  /** Whether completed jobs are kept (`retention.completed > 0`): `ctx.transaction` completes as the completer would. */
  keepCompleted?: boolean;
  /** Takes `ctx.progress` values (checked JSON text); none: progress is dropped. */
  progress?: (job: Job, json: string) => void;
  /** The metric handles of a job's (queue, kind) (no-op handles with `metrics: false`). */
  jobMetrics: (job: Job) => JobHandles;
  /** The span name's kind label of a job (null: no spans, `tracing: false`). */
  traceKind: ((job: Job) => string) | null;
  /** Aborted handlers that have not returned (none: not watched). */
  stuck?: StuckHandlers;
  /** How long after its abort a handler that has not returned is reported stuck (ms, default 5 000). */
  stuckGraceMs?: number;
  /** The slots taken (each attempt's `released`), for shutdown to wait on. */
  slots?: Set<InFlight>;
}

/** An attempt in flight. */
export interface InFlight {
  job: Job;
  abort(reason: AbortReason): void;
  /** Settles when the attempt's outcome is recorded (or given up). */
  done: Promise<void>;
  /** Settles when the slot is free: the outcome is recorded and the handler has returned. */
  released: Promise<void>;
  /** Whether the attempt is heartbeated now (not while its REPEATABLE READ `ctx.transaction` is open). */
  heartbeats(): boolean;
  /** The slot is free: the outcome is recorded and the handler has returned. */
  readonly slotFreed: boolean;
  /** The outcome is committed, or its write was given up. */
  readonly outcomeWritten: boolean;
}

/** What a handler's attempt came to. */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** A promise made when someone first asks for it (shutdown, tests), settled when its moment comes. */
class Moment {
  private promise: Promise<void> | null = null;
  private resolve: (() => void) | null = null;

  constructor(private reached: boolean) {}

  get(): Promise<void> {
    if (!this.promise) {
      this.promise = this.reached ? Promise.resolve() : new Promise<void>((r) => this.resolve = r);
    }
    return this.promise;
  }

  reach(): void {
    this.reached = true;
    this.resolve?.();
  }
}

/**
 * Told of an attempt's moments (the dispatcher): one object for every attempt of a queue instead of
 * closures per attempt. An aborted handler (cancel, deadline, shutdown) has its outcome written at once but
 * keeps its slot until it returns (src/worker/stuck.ts).
 */
export interface AttemptHost {
  /** The slot can be reused: the outcome is recorded and the handler has returned (`a.slotFreed`). */
  attemptSettled(a: InFlight): void;
  /** The outcome is recorded (a completion: handed to the completer) or given up. */
  attemptRecorded?(a: InFlight): void;
  /**
   * The outcome is committed (a completion: its batch) or its write was given up (the leader's rescue ends
   * the attempt) (`a.outcomeWritten`).
   */
  attemptWritten?(a: InFlight): void;
}

/** Starts an attempt; `host` is told of its moments (a function: only of the freed slot). */
export function execute(job: Job, d: ExecutorDeps, host: AttemptHost | (() => void)): InFlight {
  return new Attempt(job, d, typeof host === "function" ? { attemptSettled: host } : host);
}

/**
 * One attempt, as a state machine rather than a chain of promises: an attempt that completes allocates its
 * context, the two reactions to its handler's promise and its completion, and no promise of its own (`done`
 * and `released` are made only when asked for: shutdown, tests). The steps: `start` calls the handler,
 * `settle` takes its outcome (or the abort's), `decide` records it, `written` frees the slot once the
 * handler has returned (an aborted one that has not is watched for being stuck first).
 */
class Attempt implements InFlight, AttemptLink, BatchSink<boolean> {
  slotFreed = false;
  outcomeWritten = false;
  /** The outcome was recorded (or given up) and the slot waits only for the handler to return. */
  private recordedDone = false;
  /** The signal, made when the handler first reads `ctx.signal` (most never do). */
  private ac: AbortController | null = null;
  private abortedWith: AbortReason | null = null;
  private abortedAt = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The handler's promise (null: no handler, or it returned a plain value). */
  private handlerPromise: Promise<unknown> | null = null;
  private handlerReturned = true;
  /** Waiting for the handler's outcome: an abort ends the wait. */
  private waiting = false;
  private startedAt = 0;
  private trace: AttemptTrace | null = null;
  /** The completed result, kept for the `completed` event when someone listens. */
  private result: unknown = null;
  readonly tx: AttemptTx = attemptTx();
  private readonly runner: KindRunner | undefined;
  /** Made when `done` or `released` is first asked for. */
  private recordedAt: Moment | null = null;
  private releasedAt: Moment | null = null;

  constructor(
    readonly job: Job,
    private readonly d: ExecutorDeps,
    private readonly host: AttemptHost,
  ) {
    this.runner = d.runners.get(job.kind);
    if (this.runner?.timeout) this.timer = setTimeout(() => this.abort("deadline"), this.runner.timeout);
    d.slots?.add(this);
    this.start();
  }

  get done(): Promise<void> {
    return (this.recordedAt ??= new Moment(this.recordedDone)).get();
  }

  get released(): Promise<void> {
    return (this.releasedAt ??= new Moment(this.slotFreed)).get();
  }

  heartbeats(): boolean {
    return !this.tx.snapshotOpen;
  }

  abort(reason: AbortReason): void {
    if (this.abortedWith) return;
    this.abortedWith = reason;
    this.abortedAt = Date.now();
    this.ac?.abort(reason);
    // The handler may go on running: its outcome is no longer waited for.
    if (this.waiting) this.settle(null);
  }

  /** Counts a callback the handler registered (`AttemptLink`). */
  callbackRegistered(): void {
    this.d.jobMetrics(this.job).callbackRegistered.inc();
  }

  /** The attempt's signal (`AttemptLink`). */
  signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.abortedWith) this.ac.abort(this.abortedWith);
    }
    return this.ac.signal;
  }

  private start(): void {
    const { job, d, runner } = this;
    const m = d.jobMetrics(job);
    this.startedAt = Date.now();
    m.pickupLag.observe(Math.max(0, this.startedAt - job.runAt.getTime()) / 1000);
    // No span when nothing would record it and there is no producer context to pass on (an attempt's span
    // without a provider is a non-recording span that carries only its parent's context).
    const t = d.traceKind && (job.traceContext || tracerRegistered())
      ? startAttemptSpan(job, d.traceKind(job))
      : null;
    this.trace = t;
    if (!runner) {
      // Settled in a later microtask, as every outcome is: the caller registers the attempt first.
      const error = new Error(`no handler registered for kind ${job.kind} in this worker`);
      this.waiting = true;
      queueMicrotask(() => {
        if (this.waiting) this.settle({ ok: false, error });
      });
      return;
    }
    const ctx = createJobContext(
      job,
      this,
      d.engine,
      d.waiters,
      d.pollInterval * 4,
      t?.traceparent ?? null,
      extrasOf(d),
    );
    if (t) bindAttemptContext(ctx, t.context);
    let p: Promise<unknown>;
    if (t) p = withContext(t.context, async () => await runner.run(job, ctx));
    else {
      // Called directly (no async wrapper per attempt): a handler that throws before it returns a
      // promise rejects the same way.
      try {
        const v = runner.run(job, ctx);
        p = v instanceof Promise ? v : Promise.resolve(v);
      } catch (e) {
        p = Promise.reject(e);
      }
    }
    this.handlerReturned = false;
    this.handlerPromise = p;
    this.waiting = true;
    if (this.abortedWith) this.settle(null);
    p.then(
      (value) => {
        this.handlerReturned = true;
        if (this.waiting) this.settle({ ok: true, value });
        else if (this.recordedDone) this.release();
      },
      (error) => {
        this.handlerReturned = true;
        if (this.waiting) this.settle({ ok: false, error });
        else if (this.recordedDone) this.release();
      },
    );
  }

  /** The handler's outcome, or null once the attempt is aborted (the handler may still be running). */
  private settle(o: Outcome | null): void {
    this.waiting = false;
    const outcome = o ?? { ok: false, error: null };
    // A transaction the handler left running (not awaited) ends before the outcome is decided: it may
    // complete the job. An aborted attempt does not wait (its outcome is lease-guarded either way).
    if (this.runner && !this.abortedWith && this.tx.pending) {
      this.tx.pending.then(() => this.decide(outcome));
    } else this.decide(outcome);
  }

  /** Records the outcome: a completion goes to the completer at once; the rest through `record`. */
  private decide(outcome: Outcome): void {
    const { job, d, tx } = this;
    if (this.timer) clearTimeout(this.timer);
    const m = d.jobMetrics(job);
    m.duration.observe((Date.now() - this.startedAt) / 1000);
    if (this.trace) {
      endAttemptSpan(this.trace, !outcome.ok, this.abortedWith ?? (outcome.ok ? undefined : outcome.error));
    }
    // The common case, without a promise of its own: a value to store, nothing else decided for the attempt.
    if (outcome.ok && !tx.completed && !tx.leaseLost && !this.abortedWith) {
      const v = outcome.value;
      if (v !== PARKED && !isSnooze(v)) {
        let resultJson: string | null = null;
        try {
          resultJson = v === undefined || v === null
            ? "null"
            : checkJsonValue("result", v, { exactNumbers: true });
        } catch {
          // Not storable: `record` fails the attempt for good.
        }
        if (resultJson !== null) {
          this.complete(v, resultJson);
          return;
        }
      }
    }
    record(job, this.runner, outcome, this.abortedWith, d, tx).then(
      (completion) =>
        completion ? this.complete(completion.value, completion.resultJson) : this.written(false),
      (e) => {
        // The attempt stays `running` in the database: the heartbeat names it and the leader's rescue ends it.
        const why = describeThrown(e);
        d.logger.error(`svc: could not record the outcome of job ${job.id}: ${why}`);
        d.abandon?.(job, `could not record the outcome: ${why}`);
        d.engine.forgetAttempt?.(job);
        this.written(false);
      },
    );
  }

  /**
   * Hands a value to the completer: the slot is freed now; the completion is written with the next batch (the
   * completer's own statement, beside the next claim), which tells this attempt (`batchWritten`). Shutdown
   * drains the completer, so nothing is lost.
   */
  private complete(v: unknown, resultJson: string): void {
    const { job, d } = this;
    if (d.on.completed) this.result = v === undefined ? null : v;
    d.completer.addTo({
      id: job.id,
      lease: job.lease,
      result: v === undefined ? null : v,
      resultJson,
      startedAt: job.attemptedAt ?? undefined,
    }, this);
    d.jobMetrics(job).completed.inc();
    this.written(true);
  }

  /** The completion's batch was written (`BatchSink`): `ok` false when the attempt was no longer current. */
  batchWritten(ok: boolean): void {
    this.wrote();
    const { d, job } = this;
    if (ok && d.on.completed) {
      emit(d.on, d.logger, "completed", { ...job, state: "completed", result: this.result });
    }
  }

  /** The completion's batch failed (`BatchSink`): the completer gave it up; the leader's rescue ends the attempt. */
  batchFailed(): void {
    this.wrote();
  }

  /**
   * The outcome is recorded. `pending`: its write is still to come (a completion in the completer's batch,
   * which tells `batchWritten`); else it is committed, or was given up.
   */
  private written(pending: boolean): void {
    if (!pending) this.wrote();
    this.recordedDone = true;
    this.recordedAt?.reach();
    this.host.attemptRecorded?.(this);
    if (this.handlerReturned) {
      this.release();
      return;
    }
    // Aborted and not returned yet: the slot stays taken until it does; past the grace it is stuck.
    const { d, job } = this;
    if (d.stuck) {
      d.stuck.watch(
        {
          job_id: job.id,
          lease: job.lease,
          kind: job.kind,
          queue: job.queue,
          reason: this.abortedWith ?? "aborted",
        },
        this.abortedAt,
        this.handlerPromise!,
        d.stuckGraceMs ?? 5_000,
      ).then(() => this.release(), () => this.release());
    }
    // Without a watch, the handler's own reactions (start) release the slot when it returns.
  }

  private wrote(): void {
    if (this.outcomeWritten) return;
    this.outcomeWritten = true;
    this.host.attemptWritten?.(this);
  }

  /** Frees the slot (once). */
  private release(): void {
    if (this.slotFreed) return;
    this.slotFreed = true;
    this.d.slots?.delete(this);
    this.releasedAt?.reach();
    this.host.attemptSettled(this);
  }
}

/** What every attempt of a worker lends its context (made once per worker). */
const extrasByDeps = new WeakMap<ExecutorDeps, JobContextExtras>();
function extrasOf(d: ExecutorDeps): JobContextExtras {
  let x = extrasByDeps.get(d);
  if (!x) {
    x = { logger: d.logger, enqueuer: d.enqueuer, keep: d.keepCompleted, progress: d.progress };
    extrasByDeps.set(d, x);
  }
  return x;
}

async function record(
  job: Job,
  runner: KindRunner | undefined,
  outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
  abortedWith: AbortReason | null,
  d: ExecutorDeps,
  tx: AttemptTx,
): Promise<{ value: unknown; resultJson: string } | void> {
  const { engine, logger, on } = d;
  if (tx.completed) {
    // ctx.transaction completed the job: nothing else is written for this attempt.
    if (!outcome.ok) {
      logger.warn(
        `svc: job ${job.id}: the handler threw after ctx.transaction completed the job; it stays completed: ${
          describeThrown(outcome.error)
        }`,
      );
    }
    d.jobMetrics(job).completed.inc();
    emit(on, logger, "completed", { ...job, state: "completed", result: tx.completed.result });
    return;
  }
  if (tx.leaseLost) return; // the attempt is someone else's now (cancelled, rescued): nothing to record
  if (abortedWith === "cancelled") {
    // Someone else already changed the job (cancel, rescue): nothing more is written for this attempt.
    engine.forgetAttempt?.(job);
    return;
  }
  if (abortedWith === "shutdown" || abortedWith === "deadline") {
    const error = abortedWith === "shutdown"
      ? "aborted by shutdown"
      : `deadline exceeded: the handler ran longer than its timeout of ${runner?.timeout} ms`;
    return await fail(job, error, false, abortedWith === "shutdown" ? 0 : undefined, d);
  }
  if (outcome.ok) {
    const v = outcome.value;
    if (v === PARKED) return;
    if (isSnooze(v)) {
      const snoozed = await retryWithin(
        () => engine.snooze({ id: job.id, lease: job.lease, delayMs: v.snoozeMs }),
        d.outcomeRetryMs,
        logger,
        `snoozing job ${job.id}`,
      );
      if (snoozed) {
        d.jobMetrics(job).snoozed.inc();
        emit(on, logger, "snoozed", job, v.snoozeMs);
      }
      return;
    }
    // A result PostgreSQL cannot store fails this attempt for good, before it reaches a batch.
    let resultJson: string;
    try {
      resultJson = v === undefined || v === null
        ? "null"
        : checkJsonValue("result", v, { exactNumbers: true });
    } catch (e) {
      const why = describeThrown(e).replace(/^result:? /, "");
      return await fail(job, `result cannot be stored: ${why}`, true, undefined, d, e);
    }
    return { value: v, resultJson };
  }
  const terminal = safeInstanceOf(outcome.error, TerminalError);
  // A handler's own error keeps its stack; an error of svc's (no handler for the kind) has none worth keeping.
  const stack = runner ? stackOf(outcome.error) : undefined;
  await fail(
    job,
    describeThrown(outcome.error),
    terminal,
    retryDelayOf(outcome.error),
    d,
    outcome.error,
    stack,
  );
}

/** The stack of a thrown Error (an HTTP function's status and answer for its errors); undefined otherwise. */
function stackOf(e: unknown): string | undefined {
  if (!isErrorObject(e)) return undefined;
  const s = safeGet(e, "stack");
  return typeof s === "string" && s !== "" ? storableText(s) : undefined;
}

/** A thrown error may ask for its own retry delay (an HTTP `Retry-After`): a `retryDelayMs` number overrides the backoff. */
function retryDelayOf(e: unknown): number | undefined {
  const ms = safeGet(e, "retryDelayMs");
  return typeof ms === "number" && Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

/**
 * Records a failed attempt. Whether it is retried, and after how long, follows the policy stored with
 * the attempt at claim (the kind's max attempts and backoff), the same for every path that fails an
 * attempt; only a delay of the failure's own (an HTTP Retry-After, or 0 for shutdown) overrides it.
 */
export async function fail(
  job: Job,
  error: string,
  terminal: boolean,
  delayMs: number | undefined,
  d: ExecutorDeps,
  cause: unknown = new Error(error),
  stack?: string,
): Promise<void> {
  const failure: Failure = {
    id: job.id,
    lease: job.lease,
    error: storableText(error),
    terminal,
    retryDelayMs: delayMs,
    startedAt: job.attemptedAt ?? undefined,
  };
  if (stack) failure.stack = stack;
  const after = await retryWithin(
    () => d.engine.fail(failure),
    d.outcomeRetryMs,
    d.logger,
    `failing job ${job.id}`,
  );
  if (!after) return;
  const m = d.jobMetrics(after);
  if (after.state === "failed") {
    m.failed.inc();
    emit(d.on, d.logger, "failed", after, cause);
  } else {
    m.retried.inc();
    emit(d.on, d.logger, "retried", after, cause);
  }
}

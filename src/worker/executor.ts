/**
 * Runs one claimed attempt: builds its context, enforces the deadline, and records the outcome
 * (completed, retryable/failed, snoozed, parked). Every write carries the run lease.
 */
import type { Failure, WorkerStore } from "../storage/engine.ts";
import type { Job, Logger } from "../types.ts";
import { isSnooze, TerminalError } from "../errors.ts";
import type { Completer } from "./completer.ts";
import type { CallbackWaiters } from "./callback_waiters.ts";
import { type AbortReason, type AttemptTx, attemptTx, createJobContext } from "./job_context.ts";
import { type KindRunner, PARKED } from "./handlers.ts";
import { emit, type WorkerEvents } from "./events.ts";
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
  slots?: Set<Promise<void>>;
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
}

/** What a handler's attempt came to. */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Starts an attempt. `onRecorded` runs once its outcome is recorded (a completion: handed to the completer;
 * or given up); `onWritten` once the outcome is committed (a completion: its batch) or given up (its write failed for good: the
 * leader's rescue ends the attempt);
 * `onSettled` once the slot can be reused: the outcome is recorded and the handler has returned. An aborted handler (cancel, deadline,
 * shutdown) has its outcome written at once but keeps its slot until it returns (src/worker/stuck.ts).
 */
export function execute(
  job: Job,
  d: ExecutorDeps,
  onSettled: () => void,
  onRecorded?: () => void,
  onWritten?: () => void,
): InFlight {
  // The signal is made when the handler first reads `ctx.signal` (most never do); an abort before that
  // hands it out already aborted.
  let ac: AbortController | null = null;
  const signalOf = (): AbortSignal => {
    if (!ac) {
      ac = new AbortController();
      if (abortedWith) ac.abort(abortedWith);
    }
    return ac.signal;
  };
  let abortedWith: AbortReason | null = null;
  /** Ends the wait for the handler's outcome (set while the handler runs). */
  let stopWaiting: ((o: null) => void) | null = null;
  const abort = (reason: AbortReason) => {
    if (abortedWith) return;
    abortedWith = reason;
    abortedAt = Date.now();
    ac?.abort(reason);
    stopWaiting?.(null);
  };
  const runner = d.runners.get(job.kind);
  const timer = runner?.timeout ? setTimeout(() => abort("deadline"), runner.timeout) : null;
  let abortedAt = 0;
  /** Settles when the handler's own promise settles (at once without a handler). */
  let handlerSettled: Promise<unknown> = Promise.resolve();
  let handlerReturned = true;

  const tx = attemptTx();
  const done = (async () => {
    let outcome: Outcome;
    const m = d.jobMetrics(job);
    const startedAt = Date.now();
    m.pickupLag.observe(Math.max(0, startedAt - job.runAt.getTime()) / 1000);
    // No span when nothing would record it and there is no producer context to pass on (an attempt's span
    // without a provider is a non-recording span that carries only its parent's context).
    const t: AttemptTrace | null = d.traceKind && (job.traceContext || tracerRegistered())
      ? startAttemptSpan(job, d.traceKind(job))
      : null;
    if (!runner) {
      outcome = { ok: false, error: new Error(`no handler registered for kind ${job.kind} in this worker`) };
    } else {
      const ctx = createJobContext(
        job,
        signalOf,
        d.engine,
        d.waiters,
        d.pollInterval * 4,
        () => m.callbackRegistered.inc(),
        t?.traceparent ?? null,
        { logger: d.logger, enqueuer: d.enqueuer, keep: d.keepCompleted, tx, progress: d.progress },
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
      handlerReturned = false;
      // The handler's outcome, or null once the attempt is aborted (the handler may still be running).
      outcome = await new Promise<Outcome | null>((resolve) => {
        stopWaiting = resolve;
        if (abortedWith) resolve(null);
        handlerSettled = p.then(
          (value) => {
            handlerReturned = true;
            resolve({ ok: true, value });
          },
          (error) => {
            handlerReturned = true;
            resolve({ ok: false, error });
          },
        );
      }) ?? { ok: false, error: null };
      stopWaiting = null;
      // A transaction the handler left running (not awaited) ends before the outcome is decided: it may
      // complete the job. An aborted attempt does not wait (its outcome is lease-guarded either way).
      if (!abortedWith && tx.pending) await tx.pending;
    }
    if (timer) clearTimeout(timer);
    m.duration.observe((Date.now() - startedAt) / 1000);
    if (t) endAttemptSpan(t, !outcome.ok, abortedWith ?? (outcome.ok ? undefined : outcome.error));
    try {
      const completion = await record(job, runner, outcome, abortedWith, d, tx);
      if (onWritten) {
        if (completion) completion.written.then(onWritten, onWritten);
        else onWritten();
      }
    } catch (e) {
      // The attempt stays `running` in the database: the heartbeat names it and the leader's rescue ends it.
      const why = describeThrown(e);
      d.logger.error(`svc: could not record the outcome of job ${job.id}: ${why}`);
      d.abandon?.(job, `could not record the outcome: ${why}`);
      d.engine.forgetAttempt?.(job);
      onWritten?.();
    }
  })();
  const released = done.then(() => {
    onRecorded?.();
    if (handlerReturned) return;
    // Aborted and not returned yet: the slot stays taken until it does; past the grace it is stuck.
    if (d.stuck) {
      return d.stuck.watch(
        {
          job_id: job.id,
          lease: job.lease,
          kind: job.kind,
          queue: job.queue,
          reason: abortedWith ?? "aborted",
        },
        abortedAt,
        handlerSettled,
        d.stuckGraceMs ?? 5_000,
      );
    }
    return handlerSettled.then(() => {}, () => {});
  }).finally(() => {
    d.slots?.delete(released);
    onSettled();
  });
  d.slots?.add(released);

  return { job, abort, done, released, heartbeats: () => !tx.snapshotOpen };
}

async function record(
  job: Job,
  runner: KindRunner | undefined,
  outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
  abortedWith: AbortReason | null,
  d: ExecutorDeps,
  tx: AttemptTx,
): Promise<{ written: Promise<boolean> } | void> {
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
    // The slot is freed now; the completion is written with the next batch (the completer's own
    // statement, beside the next claim). Shutdown drains the completer, so nothing is lost.
    const written = d.completer.add({
      id: job.id,
      lease: job.lease,
      result: v === undefined ? null : v,
      resultJson,
      startedAt: job.attemptedAt ?? undefined,
    });
    d.jobMetrics(job).completed.inc();
    if (on.completed) {
      written.then((ok) => {
        if (ok) emit(on, logger, "completed", { ...job, state: "completed", result: v ?? null });
      });
    }
    // Wrapped: an async function that returned the promise itself would wait for it (the commit).
    return { written };
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

/**
 * Runs one claimed attempt: builds its context, enforces the deadline, and records the outcome
 * (completed, retryable/failed, snoozed, parked). Every write carries the run lease.
 */
import type { StorageEngine } from "../storage/engine.ts";
import type { Job, Logger } from "../types.ts";
import { isSnooze, TerminalError } from "../errors.ts";
import type { Completer } from "./completer.ts";
import type { CallbackWaiters } from "./callback_waiters.ts";
import { type AbortReason, createJobContext } from "./job_context.ts";
import { type KindRunner, PARKED } from "./handlers.ts";
import { emit, type WorkerEvents } from "./events.ts";
import { checkJsonValue, storableText } from "../validation.ts";
import { retryWithin } from "./outcome_retry.ts";
import type { JobHandles } from "../metrics/svc_metrics.ts";
import {
  type AttemptTrace,
  bindAttemptContext,
  endAttemptSpan,
  startAttemptSpan,
  withContext,
} from "../metrics/tracing.ts";

/** Shared by every dispatcher of a worker. */
export interface ExecutorDeps {
  engine: StorageEngine;
  runners: Map<string, KindRunner>;
  completer: Completer;
  waiters: CallbackWaiters;
  logger: Logger;
  on: WorkerEvents;
  pollInterval: number;
  /** How long a failing outcome write is retried (ms): `outcome_retry.ts`. */
  outcomeRetryMs: number;
  /** The metric handles of a job's (queue, kind) (no-op handles with `metrics: false`). */
  jobMetrics: (job: Job) => JobHandles;
  /** The span name's kind label of a job (null: no spans, `tracing: false`). */
  traceKind: ((job: Job) => string) | null;
}

/** An attempt in flight. */
export interface InFlight {
  job: Job;
  abort(reason: AbortReason): void;
  /** Settles when the attempt's outcome is recorded (or given up). */
  done: Promise<void>;
}

function message(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  try {
    return typeof e === "string" ? e : JSON.stringify(e);
  } catch {
    return String(e);
  }
}

/** Starts an attempt; `onSettled` runs once the slot can be reused. */
export function execute(job: Job, d: ExecutorDeps, onSettled: () => void): InFlight {
  const ac = new AbortController();
  let abortedWith: AbortReason | null = null;
  let abortNow!: () => void;
  const aborted = new Promise<void>((r) => (abortNow = r));
  const abort = (reason: AbortReason) => {
    if (abortedWith) return;
    abortedWith = reason;
    ac.abort(reason);
    abortNow();
  };
  const runner = d.runners.get(job.kind);
  const timer = runner?.timeout ? setTimeout(() => abort("deadline"), runner.timeout) : null;

  const done = (async () => {
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    const m = d.jobMetrics(job);
    const startedAt = Date.now();
    m.pickupLag.observe(Math.max(0, startedAt - job.runAt.getTime()) / 1000);
    const t: AttemptTrace | null = d.traceKind ? startAttemptSpan(job, d.traceKind(job)) : null;
    if (!runner) {
      outcome = { ok: false, error: new Error(`no handler registered for kind ${job.kind} in this worker`) };
    } else {
      const ctx = createJobContext(
        job,
        ac.signal,
        d.engine,
        d.waiters,
        d.pollInterval * 4,
        () => m.callbackRegistered.inc(),
        t?.traceparent ?? null,
      );
      if (t) bindAttemptContext(ctx, t.context);
      const run = async () => await runner.run(job, ctx);
      const p = (t ? withContext(t.context, run) : run()).then(
        (value) => ({ ok: true as const, value }),
        (error) => ({ ok: false as const, error }),
      );
      outcome = await Promise.race([p, aborted.then(() => null)]) ?? { ok: false, error: null };
    }
    if (timer) clearTimeout(timer);
    m.duration.observe((Date.now() - startedAt) / 1000);
    if (t) endAttemptSpan(t, outcome.ok ? undefined : outcome.error ?? abortedWith ?? "aborted");
    try {
      await record(job, runner, outcome, abortedWith, d);
    } catch (e) {
      // The attempt stays as it was; the leader's rescue finds it once its heartbeat is stale.
      d.logger.error(`svc: could not record the outcome of job ${job.id}: ${message(e)}`);
    }
  })().finally(onSettled);

  return { job, abort, done };
}

async function record(
  job: Job,
  runner: KindRunner | undefined,
  outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
  abortedWith: AbortReason | null,
  d: ExecutorDeps,
): Promise<void> {
  const { engine, logger, on } = d;
  if (abortedWith === "cancelled") return; // someone else already changed the job (cancel, rescue)
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
        () => engine.snooze(job.id, job.lease, v.snoozeMs),
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
      resultJson = checkJsonValue("result", v === undefined ? null : v);
    } catch (e) {
      const why = (e as Error).message.replace(/^result:? /, "");
      return await fail(job, `result cannot be stored: ${why}`, true, undefined, d, e);
    }
    // The slot is freed now; the completion is written with the next batch (the completer's own
    // statement, beside the next claim). Shutdown drains the completer, so nothing is lost.
    const written = d.completer.add({
      id: job.id,
      lease: job.lease,
      result: v === undefined ? null : v,
      resultJson,
    });
    d.jobMetrics(job).completed.inc();
    if (on.completed) {
      written.then((ok) => {
        if (ok) emit(on, logger, "completed", { ...job, state: "completed", result: v ?? null });
      });
    }
    return;
  }
  const terminal = outcome.error instanceof TerminalError;
  await fail(job, message(outcome.error), terminal, retryDelayOf(outcome.error), d, outcome.error);
}

/** A thrown error may ask for its own retry delay (an HTTP `Retry-After`): a `retryDelayMs` number overrides the backoff. */
function retryDelayOf(e: unknown): number | undefined {
  const ms = (e as { retryDelayMs?: unknown } | null)?.retryDelayMs;
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
): Promise<void> {
  const failure = {
    id: job.id,
    lease: job.lease,
    error: storableText(error),
    terminal,
    retryDelayMs: delayMs,
  };
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

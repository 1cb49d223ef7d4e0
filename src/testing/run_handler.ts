/**
 * `runHandler`: runs a handler once against a job built from args, without a database, and tells what
 * the worker would have done with its outcome. `ctx.enqueue` records follow-up jobs, `ctx.logger`
 * records lines, `ctx.progress` records values, `ctx.waitForCallback` is answered by `resume`.
 * `ctx.transaction` runs its callback without a database: its `tx.enqueue` records follow-ups that are kept
 * only when the callback returns (as a rollback would drop them), and `tx.sql` / `tx.db` throw (test a
 * handler's own SQL with `drain`, against PostgreSQL).
 */
import { describeThrown, describeValue, safeGet, safeInstanceOf } from "../describe.ts";
import { InvalidStateError, isSnooze, SvcError, TerminalError, ValidationError } from "../errors.ts";
import type { EnqueueItem, EnqueueOptions, Job, Logger } from "../types.ts";
import type { StandardSchemaV1 } from "../standard_schema.ts";
import {
  type AnyTasks,
  argsValidationError,
  checkArgs,
  checkSchemaMap,
  formatIssues,
  type SchemaMap,
  type TaskInput,
  type TaskResult,
} from "../tasks.ts";
import { defaultBackoff, type HandlerEntry } from "../worker/handlers.ts";
import { CallbackEndedError, type JobContext, progressJson } from "../worker/job_context.ts";
import { jobLogger } from "../worker/logger.ts";
import { normalizeEnqueue } from "../client/enqueue_input.ts";
import { checkJsonValue } from "../validation.ts";

/** Options of `runHandler`: the job's fields, and what stands in for the database. */
export interface RunHandlerOptions {
  /** The job's kind (default `test`). */
  kind?: string;
  /** The job's id (default 1); follow-up jobs get the next ids. */
  id?: number;
  /** Which attempt this is (default 1): a throw on the last one fails the job. */
  attempt?: number;
  /** The job's own limit of attempts (default 25); the entry's `maxAttempts` caps it as in a worker. */
  maxAttempts?: number;
  queue?: string;
  priority?: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  /** The job's limit key (default none). */
  limitKey?: string;
  /** The kind's args schema: args it refuses fail the job without running the handler, as in a worker. */
  schema?: StandardSchemaV1;
  /** Schemas by kind that `ctx.enqueue` validates follow-up jobs with, as the worker's client would. */
  schemas?: SchemaMap;
  /** Aborts `ctx.signal` with its reason (to test how the handler reacts to a cancel or a shutdown). */
  signal?: AbortSignal;
  /** Answers `ctx.waitForCallback(id)`; without it, waiting rejects with CallbackEndedError. */
  resume?: (callbackId: string) => unknown | Promise<unknown>;
  /** Also gets every line of `ctx.logger` (named for the job as in a worker). */
  logger?: Logger;
}

/** A job the handler enqueued through `ctx.enqueue` or `ctx.enqueueMany`. */
export interface EnqueuedJob {
  kind: string;
  args: Record<string, unknown>;
  /** The options it was enqueued with. */
  opts: Omit<EnqueueOptions, "tx">;
  /** The job as `ctx.enqueue` returned it to the handler. */
  job: Job;
}

/** A line of `ctx.logger`. */
export interface LoggedLine {
  level: "debug" | "info" | "warn" | "error";
  /** The arguments, as the JSON logger joins them (errors by their message, objects as JSON). */
  message: string;
  args: unknown[];
}

/** What the worker would have done with the handler's outcome. */
export interface HandlerRun<R = unknown> {
  /**
   * The state the job would be in: `completed` (it returned), `retryable` (it threw and attempts remain),
   * `failed` (TerminalError, args refused by the schema, the last attempt, a result JSON cannot hold) or
   * `scheduled` (it returned `snooze(ms)`).
   */
  state: "completed" | "retryable" | "failed" | "scheduled";
  /** The returned value (completed). */
  result?: R;
  /** What the handler threw, or why the attempt failed (retryable, failed). */
  error?: unknown;
  /** The delay before the next attempt (retryable): the error's `retryDelayMs`, else the kind's backoff. */
  retryDelayMs?: number;
  /** The snooze (scheduled). */
  snoozeMs?: number;
  /** The job the handler got. */
  job: Job;
  /** Follow-up jobs, in order. */
  enqueued: EnqueuedJob[];
  /** `ctx.logger`'s lines, in order. */
  logs: LoggedLine[];
  /** The values of `ctx.progress`, in order (each checked as a worker checks it). */
  progress: unknown[];
  /**
   * Whether `ctx.transaction` completed the job (`result` is then the transaction's value, as in a
   * worker, whatever the handler did afterwards).
   */
  completedInTransaction: boolean;
}

function text(a: unknown): string {
  return describeValue(a);
}

/** Keeps the lines; its `child` is itself (the job's fields are those of the run). */
function recorder(logs: LoggedLine[]): Logger {
  const line = (level: LoggedLine["level"]) => (...args: unknown[]) => {
    logs.push({ level, message: args.map(text).join(" "), args });
  };
  const logger: Logger = {
    debug: line("debug"),
    info: line("info"),
    warn: line("warn"),
    error: line("error"),
    child: () => logger,
  };
  return logger;
}

/**
 * Runs `handler` (a function or `{ handler, timeout, maxAttempts, backoff }`, as in `createWorker`'s
 * `handlers`) once on a job with these args, without a database, and returns what the worker would do.
 * The entry's `timeout` aborts `ctx.signal` with `deadline` and fails the attempt as a worker does.
 */
export async function runHandler<E extends object = Record<string, unknown>, T extends object = AnyTasks>(
  handler: HandlerEntry<E, T>,
  args?: TaskInput<E>,
  opts: RunHandlerOptions = {},
): Promise<HandlerRun<TaskResult<E>>> {
  const entry = typeof handler === "function" ? { handler } : handler;
  if (!entry || typeof entry.handler !== "function") {
    throw new ValidationError("runHandler: expected a handler function or { handler, ... }");
  }
  const fn = entry.handler as unknown as (job: Job, ctx: JobContext) => unknown;
  const schemas = checkSchemaMap("runHandler: schemas", opts.schemas);
  const stored = normalizeEnqueue({
    kind: opts.kind ?? "test",
    args: (args ?? {}) as Record<string, unknown>,
    queue: opts.queue,
    priority: opts.priority,
    maxAttempts: opts.maxAttempts,
    tags: opts.tags,
    metadata: opts.metadata,
    limitKey: opts.limitKey,
  });
  const attempt = opts.attempt ?? 1;
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new ValidationError("runHandler: attempt must be >= 1");
  }
  const now = new Date();
  const limit = Math.min(stored.maxAttempts, entry.maxAttempts ?? Infinity);
  let nextId = opts.id ?? 1;
  const job: Job = {
    id: nextId++,
    kind: stored.kind,
    queue: stored.queue,
    args: stored.args,
    state: "running",
    priority: stored.priority,
    attempt,
    maxAttempts: stored.maxAttempts,
    effectiveMaxAttempts: limit,
    runAt: now,
    createdAt: now,
    claimedAt: now,
    attemptedAt: now,
    finalizedAt: null,
    heartbeatAt: now,
    deadlineAt: entry.timeout ? new Date(now.getTime() + entry.timeout) : null,
    errors: [],
    tags: stored.tags,
    metadata: stored.metadata,
    result: null,
    uniqueKey: null,
    limitKey: stored.limitKey,
    callbackId: null,
    callbackTimeoutAt: null,
    lease: 1,
    attemptedBy: "runHandler",
    traceContext: null,
  };

  const logs: LoggedLine[] = [];
  const enqueued: EnqueuedJob[] = [];
  const progress: unknown[] = [];
  /** The follow-ups of the transaction callback running now (kept when it returns). */
  let inTx: EnqueuedJob[] | null = null;
  let completedInTx: { result: unknown } | null = null;
  const record = async (items: EnqueueItem[], what: string): Promise<Job[]> => {
    for (const [i, item] of items.entries()) {
      if (item && "tx" in item) throw new ValidationError(`${what} takes no tx`);
      const schema = Object.hasOwn(schemas, item?.kind) ? schemas[item.kind] : undefined;
      if (schema) {
        const r = await checkArgs(schema, item.args ?? {});
        if (!r.ok) throw argsValidationError(item.kind, r.issues, items.length > 1 ? `job ${i}: ` : "");
      }
    }
    return items.map((item) => {
      const n = normalizeEnqueue(item);
      const { kind: _k, args: _a, ...options } = item;
      const due = n.runAt === null || n.runAt <= new Date();
      const followUp: Job = {
        ...job,
        id: nextId++,
        kind: n.kind,
        queue: n.queue,
        args: n.args,
        state: due ? "available" : "scheduled",
        priority: n.priority,
        attempt: 0,
        maxAttempts: n.maxAttempts,
        effectiveMaxAttempts: null,
        runAt: n.runAt ?? new Date(),
        createdAt: new Date(),
        claimedAt: null,
        attemptedAt: null,
        heartbeatAt: null,
        deadlineAt: null,
        tags: n.tags,
        metadata: n.metadata,
        lease: 0,
        attemptedBy: null,
      };
      (inTx ?? enqueued).push({ kind: n.kind, args: n.args, opts: options, job: followUp });
      return followUp;
    });
  };

  const ac = new AbortController();
  let deadline = false;
  const onAbort = () => ac.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort);
  if (opts.signal?.aborted) onAbort();
  let timeoutTimer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"deadline">((resolve) => {
    if (entry.timeout) {
      timeoutTimer = setTimeout(() => {
        deadline = true;
        ac.abort("deadline");
        resolve("deadline");
      }, entry.timeout);
    }
  });

  const ctx: JobContext<AnyTasks> = {
    signal: ac.signal,
    traceparent: null,
    logger: jobLogger(recorder(logs), job),
    registerCallback: () => Promise.resolve(crypto.randomUUID()),
    waitForCallback: async (callbackId) => {
      if (!opts.resume) {
        throw new CallbackEndedError("runHandler: no resume option answers ctx.waitForCallback");
      }
      return await opts.resume(callbackId);
    },
    enqueue: async (kind, ...rest) => {
      const [args, o] = rest;
      return (await record([{ ...o, kind, args }], "ctx.enqueue"))[0];
    },
    enqueueMany: (items) => record(items, "ctx.enqueueMany"),
    progress: (value) => {
      progressJson(value);
      progress.push(value === undefined ? null : value);
    },
    transaction: async (fn) => {
      if (completedInTx) {
        throw new InvalidStateError(`ctx.transaction: job ${job.id} was already completed by a transaction`);
      }
      if (inTx) throw new InvalidStateError("ctx.transaction: a transaction of this job is already open");
      const noDb = () => {
        throw new SvcError(
          "runHandler runs without a database: test a handler's own SQL in ctx.transaction with drain()",
          "invalid_state",
        );
      };
      const pending: EnqueuedJob[] = [];
      inTx = pending;
      let value;
      try {
        value = await fn({
          enqueue: async (kind, ...rest) => {
            const [args, o] = rest;
            return (await record([{ ...o, kind, args }], "tx.enqueue"))[0];
          },
          enqueueMany: (items) => record(items, "tx.enqueueMany"),
          get sql() {
            return noDb();
          },
          get db() {
            return noDb();
          },
        });
      } finally {
        inTx = null;
      }
      const result = value === undefined ? null : value;
      checkJsonValue("result", result, { exactNumbers: true });
      enqueued.push(...pending);
      completedInTx = { result };
      return value;
    },
  };
  if (opts.logger) {
    const forward = jobLogger(opts.logger, job);
    const own = ctx.logger;
    (ctx as { logger: Logger }).logger = {
      debug: (...a) => (own.debug(...a), forward.debug(...a)),
      info: (...a) => (own.info(...a), forward.info(...a)),
      warn: (...a) => (own.warn(...a), forward.warn(...a)),
      error: (...a) => (own.error(...a), forward.error(...a)),
    };
  }

  const base = { job, enqueued, logs, progress, completedInTransaction: false };
  const failed = (error: unknown, terminal: boolean): HandlerRun<TaskResult<E>> => {
    if (terminal || attempt >= limit) return { ...base, state: "failed", error };
    const own = safeGet(error, "retryDelayMs");
    const retryDelayMs = typeof own === "number" && Number.isFinite(own) && own >= 0
      ? own
      : (entry.backoff ?? defaultBackoff)(attempt);
    return { ...base, state: "retryable", error, retryDelayMs };
  };

  try {
    if (opts.schema) {
      let r;
      try {
        r = await checkArgs(opts.schema, job.args);
      } catch (e) {
        return failed(e, false); // a validator that throws fails the attempt, as in a worker
      }
      if (!r.ok) {
        return failed(new TerminalError(`args of ${job.kind} are invalid: ${formatIssues(r.issues)}`), true);
      }
      job.args = r.value as Record<string, unknown>;
    }
    const run = Promise.resolve().then(() => fn(job, ctx)).then(
      (value) => ({ ok: true as const, value }),
      (error) => ({ ok: false as const, error }),
    );
    const outcome = await Promise.race([run, timedOut]);
    if (completedInTx) {
      // As in a worker: the transaction completed the job; what the handler did afterwards changes nothing.
      return {
        ...base,
        completedInTransaction: true,
        state: "completed",
        result: (completedInTx as { result: unknown }).result as TaskResult<E>,
      };
    }
    if (outcome === "deadline" || deadline) {
      return failed(
        new Error(`deadline exceeded: the handler ran longer than its timeout of ${entry.timeout} ms`),
        false,
      );
    }
    if (!outcome.ok) return failed(outcome.error, safeInstanceOf(outcome.error, TerminalError));
    const value = outcome.value;
    if (isSnooze(value)) return { ...base, state: "scheduled", snoozeMs: value.snoozeMs };
    try {
      checkJsonValue("result", value === undefined ? null : value, { exactNumbers: true });
    } catch (e) {
      const why = describeThrown(e).replace(/^result:? /, "");
      return failed(new TerminalError(`result cannot be stored: ${why}`), true);
    }
    return { ...base, state: "completed", result: (value === undefined ? null : value) as TaskResult<E> };
  } finally {
    clearTimeout(timeoutTimer);
    opts.signal?.removeEventListener("abort", onAbort);
  }
}

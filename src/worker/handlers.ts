/** Handler types, per-kind options, the default retry backoff, and args validation before a handler. */
import type { Job } from "../types.ts";
import type { JobContext } from "./job_context.ts";
import { type Snooze, TerminalError, ValidationError } from "../errors.ts";
import type { StandardSchemaV1 } from "../standard_schema.ts";
import { type AnyTasks, checkArgs, formatIssues, type TaskKind, type TaskResult } from "../tasks.ts";

/** What a handler returns: its result (stored as the job's `result`) or `snooze(ms)`. */
export type HandlerResult<R = unknown> = R | Snooze | Promise<R | Snooze>;

/**
 * A job handler: return a value (stored as the result), throw to retry, or return `snooze(ms)`. `E` is
 * the kind's task map entry (`Handler<Tasks["send_email"], Tasks>`): it types `job.args` and the result
 * (also what `ctx.transaction` completes the job with); `T`, the task map, types `ctx.enqueue`.
 */
export type Handler<E extends object = Record<string, unknown>, T extends object = AnyTasks> = (
  job: Job<E>,
  ctx: JobContext<T, TaskResult<E>>,
) => HandlerResult<TaskResult<E>>;

/** A handler with per-kind options. */
export interface HandlerDefinition<E extends object = Record<string, unknown>, T extends object = AnyTasks> {
  handler: Handler<E, T>;
  /** Hard deadline per attempt in ms (none by default). */
  timeout?: number;
  /** Attempts cap for this kind, on top of the job's own max_attempts. */
  maxAttempts?: number;
  /** Delay before retry `attempt` (1-based) in ms. */
  backoff?: (attempt: number) => number;
}

/** What `handlers` accepts for each kind. */
export type HandlerEntry<E extends object = Record<string, unknown>, T extends object = AnyTasks> =
  | Handler<E, T>
  | HandlerDefinition<E, T>;

/** The `handlers` of a worker: an entry per kind of the task map, each optional. */
export type HandlerMap<T extends object = AnyTasks> = {
  [K in TaskKind<T>]?: HandlerEntry<T[K] & object, T>;
};

/** The normalized form. */
export interface KindRunner {
  run: (job: Job, ctx: JobContext) => unknown;
  timeout?: number;
  maxAttempts?: number;
  backoff: (attempt: number) => number;
  /** Register an HTTP callback with this timeout (ms) in the claim statement itself (HTTP workers). */
  callbackTimeout?: number;
}

/** Default backoff: 2^attempt seconds plus up to 25 % jitter, capped at 24 h. */
export function defaultBackoff(attempt: number): number {
  const base = Math.min(2 ** Math.min(attempt, 30), 86_400) * 1000;
  return Math.round(base * (1 + Math.random() * 0.25));
}

/**
 * Normalizes a handler entry. With a `schema`, the job's args are validated before the handler runs:
 * args the schema refuses fail the job at once (a TerminalError with the validator's messages), and the
 * handler gets the schema's output as `job.args`.
 */
export function toRunner(kind: string, e: HandlerEntry | undefined, schema?: StandardSchemaV1): KindRunner {
  if (typeof e === "function") return { run: validating(e, schema), backoff: defaultBackoff };
  if (!e || typeof e.handler !== "function") {
    throw new ValidationError(
      `handlers.${kind}: expected a function or { handler, timeout?, maxAttempts?, backoff? }`,
    );
  }
  if (e.timeout !== undefined && !(Number.isFinite(e.timeout) && e.timeout > 0)) {
    throw new ValidationError(`handlers.${kind}.timeout must be a positive number of milliseconds`);
  }
  if (e.maxAttempts !== undefined && !(Number.isInteger(e.maxAttempts) && e.maxAttempts >= 1)) {
    throw new ValidationError(`handlers.${kind}.maxAttempts must be a positive integer`);
  }
  return {
    run: validating(e.handler, schema),
    timeout: e.timeout,
    maxAttempts: e.maxAttempts,
    backoff: e.backoff ?? defaultBackoff,
  };
}

/** The handler behind its kind's schema: args the schema refuses fail the job for good. */
function validating(handler: Handler, schema: StandardSchemaV1 | undefined): KindRunner["run"] {
  if (!schema) return handler;
  return async (job, ctx) => {
    const r = await checkArgs(schema, job.args);
    if (!r.ok) throw new TerminalError(`args of ${job.kind} are invalid: ${formatIssues(r.issues)}`);
    return await handler({ ...job, args: r.value as Record<string, unknown> }, ctx);
  };
}

/** Returned by an executor that parked its attempt in `waiting_external` (the HTTP worker): free the slot, write nothing. */
export const PARKED: unique symbol = Symbol("svc.parked");

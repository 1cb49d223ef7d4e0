/** Handler types, per-kind options and the default retry backoff. */
import type { Job } from "../types.ts";
import type { JobContext } from "./job_context.ts";
import { ValidationError } from "../errors.ts";

/** A job handler: return a value (stored as the result), throw to retry, or return `snooze(ms)`. */
export type Handler = (job: Job, ctx: JobContext) => unknown | Promise<unknown>;

/** A handler with per-kind options. */
export interface HandlerDefinition {
  handler: Handler;
  /** Hard deadline per attempt in ms (none by default). */
  timeout?: number;
  /** Attempts cap for this kind, on top of the job's own max_attempts. */
  maxAttempts?: number;
  /** Delay before retry `attempt` (1-based) in ms. */
  backoff?: (attempt: number) => number;
}

/** What `handlers` accepts for each kind. */
export type HandlerEntry = Handler | HandlerDefinition;

/** The normalized form. */
export interface KindRunner {
  run: Handler;
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

/** Normalizes a handler entry. */
export function toRunner(kind: string, e: HandlerEntry): KindRunner {
  if (typeof e === "function") return { run: e, backoff: defaultBackoff };
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
    run: e.handler,
    timeout: e.timeout,
    maxAttempts: e.maxAttempts,
    backoff: e.backoff ?? defaultBackoff,
  };
}

/** Returned by an executor that parked its attempt in `waiting_external` (the HTTP worker): free the slot, write nothing. */
export const PARKED: unique symbol = Symbol("svc.parked");

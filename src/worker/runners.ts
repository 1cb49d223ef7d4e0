/**
 * The runner registry of a worker: one `KindRunner` per job kind it executes (in-process handlers and
 * HTTP workers), and what claims store with each attempt from them (retry policies, deadlines,
 * callback timeouts).
 */
import { ValidationError } from "../errors.ts";
import type { KindPolicy } from "../storage/engine.ts";
import { defaultBackoff, type HandlerEntry, type KindRunner, toRunner } from "./handlers.ts";
import type { SchemaMap } from "../tasks.ts";
import { createHttpRunner, type HttpRunnerDeps, type HttpWorkerConfig } from "./http_worker.ts";

/** The kinds a worker runs. */
export interface RunnerRegistry {
  runners: Map<string, KindRunner>;
  /** The retry policy and deadline of each kind with settings of its own, as claims store them. */
  policies: () => Record<string, KindPolicy>;
  /** Kinds whose claim registers an HTTP callback, with its timeout in ms. */
  callbackTimeoutsMs: Record<string, number>;
}

/**
 * Builds the registry; a kind with both a handler and an HTTP worker is refused. A handler whose kind has
 * a schema validates the job's args before it runs.
 */
export function buildRunners(
  handlers: Record<string, HandlerEntry | undefined>,
  httpWorkers: Record<string, HttpWorkerConfig>,
  httpDeps: HttpRunnerDeps,
  schemas: SchemaMap = {},
): RunnerRegistry {
  const runners = new Map<string, KindRunner>();
  for (const [kind, entry] of Object.entries(handlers)) {
    runners.set(kind, toRunner(kind, entry, Object.hasOwn(schemas, kind) ? schemas[kind] : undefined));
  }
  for (const [kind, cfg] of Object.entries(httpWorkers)) {
    if (runners.has(kind)) {
      throw new ValidationError(`kind ${kind} has both a handler and an HTTP worker; keep one`);
    }
    runners.set(kind, createHttpRunner(kind, cfg, httpDeps));
  }
  const callbackTimeoutsMs: Record<string, number> = {};
  for (const [kind, r] of runners) if (r.callbackTimeout) callbackTimeoutsMs[kind] = r.callbackTimeout;
  return { runners, policies: kindPolicies(runners), callbackTimeoutsMs };
}

/** Most retry delays sent for a kind with a backoff of its own (later attempts repeat the last one). */
const MAX_DELAYS = 100;

/**
 * The retry policy and deadline of each kind with settings of its own, as claims store them with the
 * attempt. A kind's own backoff is evaluated for each attempt number at every claim (so that a backoff
 * with jitter stays random); the default backoff is computed by the database.
 */
export function kindPolicies(runners: Map<string, KindRunner>): () => Record<string, KindPolicy> {
  return () => {
    const out: Record<string, KindPolicy> = {};
    for (const [kind, r] of runners) {
      const p: KindPolicy = {};
      if (r.maxAttempts !== undefined) p.maxAttempts = r.maxAttempts;
      if (r.timeout !== undefined) p.timeoutMs = Math.round(r.timeout);
      if (r.backoff !== defaultBackoff) {
        const n = Math.min(r.maxAttempts ?? 25, MAX_DELAYS);
        p.delaysMs = Array.from({ length: n }, (_, i) => {
          const ms = r.backoff(i + 1);
          return Number.isFinite(ms) && ms >= 0 ? Math.round(ms) : defaultBackoff(i + 1);
        });
      }
      if (Object.keys(p).length > 0) out[kind] = p;
    }
    return out;
  };
}

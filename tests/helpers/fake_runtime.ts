/**
 * The worker's runtime pieces (completer, executor deps, dispatcher) built over a `FakeEngine` the way
 * `createWorker` in `src/worker/worker.ts` wires them, for unit tests without a database.
 */
import { NOOP_JOB } from "../../src/metrics/svc_metrics.ts";
import { Completer } from "../../src/worker/completer.ts";
import { Dispatcher, type QueueConfig } from "../../src/worker/dispatcher.ts";
import { type ExecutorDeps, fail, type InFlight } from "../../src/worker/executor.ts";
import { type HandlerEntry, type KindRunner, toRunner } from "../../src/worker/handlers.ts";
import { CallbackWaiters } from "../../src/worker/callback_waiters.ts";
import type { WorkerEvents } from "../../src/worker/events.ts";
import { silentLogger } from "../../src/worker/logger.ts";
import type { Job, Logger } from "../../src/types.ts";
import type { FakeEngine } from "./fake_engine.ts";

/** Lines logged, by level. */
export interface LogLines {
  debug: string[];
  info: string[];
  warn: string[];
  error: string[];
}

/** A logger that keeps what it is given. */
export function recordingLogger(): Logger & { lines: LogLines } {
  const lines: LogLines = { debug: [], info: [], warn: [], error: [] };
  const keep = (level: keyof LogLines) => (...a: unknown[]) => lines[level].push(a.map(String).join(" "));
  return { lines, debug: keep("debug"), info: keep("info"), warn: keep("warn"), error: keep("error") };
}

export interface FakeRuntime {
  deps: ExecutorDeps;
  completer: Completer;
  inFlight: Map<number, InFlight>;
  /** Events emitted, in order: [name, job id]. */
  events: [string, number][];
  logger: Logger & { lines: LogLines };
  /** A dispatcher of `queue` (not started). */
  dispatcher(queue: string, cfg: QueueConfig, pollInterval?: number): Dispatcher;
}

/** The runtime over `engine` with these handlers. */
export function fakeRuntime(
  engine: FakeEngine,
  handlers: Record<string, HandlerEntry | KindRunner>,
  opts: { retryBudgetMs?: number; pollInterval?: number; quiet?: boolean } = {},
): FakeRuntime {
  const runners = new Map<string, KindRunner>();
  for (const [kind, h] of Object.entries(handlers)) {
    runners.set(kind, "run" in h ? h : toRunner(kind, h));
  }
  const logger = recordingLogger();
  const events: [string, number][] = [];
  const on: WorkerEvents = {
    completed: (j) => events.push(["completed", j.id]),
    failed: (j) => events.push(["failed", j.id]),
    retried: (j) => events.push(["retried", j.id]),
    snoozed: (j) => events.push(["snoozed", j.id]),
  };
  const retryBudgetMs = opts.retryBudgetMs ?? 1000;
  const pollInterval = opts.pollInterval ?? 50;
  const completer: Completer = new Completer(engine, opts.quiet ? silentLogger : logger, {
    deleteRows: false,
    retryBudgetMs,
    unstorable: (c, reason) =>
      fail({ id: c.id, lease: c.lease } as Job, `result cannot be stored: ${reason}`, true, undefined, deps),
  });
  const deps: ExecutorDeps = {
    engine,
    runners,
    completer,
    waiters: new CallbackWaiters(),
    logger,
    on,
    pollInterval,
    outcomeRetryMs: retryBudgetMs,
    jobMetrics: () => NOOP_JOB,
    traceKind: null,
  };
  const inFlight = new Map<number, InFlight>();
  return {
    deps,
    completer,
    inFlight,
    events,
    logger,
    dispatcher: (queue, cfg, poll = pollInterval) =>
      new Dispatcher(queue, cfg, {
        deps,
        inFlight,
        runtimeId: "rt-test",
        policies: () => ({}),
        pollInterval: poll,
      }),
  };
}

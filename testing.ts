/**
 * Testing helpers for svc handlers and producers (`@svc/queue/testing`):
 *
 * - `runHandler(handler, args, opts)`: runs a handler once against a job built from args, without a
 *   database, and returns what the worker would do (completed, retryable, failed, scheduled), the
 *   follow-up jobs it enqueued and the lines it logged;
 * - `assertEnqueued(client, kind, expect)`: asserts against the database (or inside a transaction) that
 *   matching jobs were enqueued, and returns them;
 * - `drain(client, opts)`: runs a worker until its queues are empty and returns the jobs it ran.
 *
 * See docs/guide/handlers.md, "Testing handlers".
 *
 * @module
 */
export { runHandler } from "./src/testing/run_handler.ts";
export type { EnqueuedJob, HandlerRun, LoggedLine, RunHandlerOptions } from "./src/testing/run_handler.ts";
export { assertEnqueued } from "./src/testing/assert_enqueued.ts";
export type { DeepPartial, EnqueuedExpectation } from "./src/testing/assert_enqueued.ts";
export { drain } from "./src/testing/drain.ts";
export type { DrainOptions } from "./src/testing/drain.ts";

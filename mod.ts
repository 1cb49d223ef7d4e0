/**
 * svc: a job queue for TypeScript whose whole state lives in PostgreSQL.
 *
 * @module
 */
export { createClient } from "./src/client/client.ts";
export type { Client, ClientOptions, ClientTransaction, Enqueuer } from "./src/client/client.ts";
export type { CallbackResult } from "./src/client/external.ts";
export type { CronMethods } from "./src/client/cron.ts";
export type { PoolerMode } from "./src/db/pooler.ts";
export type { CronDefinition, CronSchedule } from "./src/cron/definition.ts";
export { createWorker } from "./src/worker/worker.ts";
export type { QueueConfig, Worker, WorkerOptions } from "./src/worker/worker.ts";
export type { FunctionRequest, HttpWorkerConfig } from "./src/worker/http_worker.ts";
export { createCallbackRouter } from "./src/http/callback_router.ts";
export type { CallbackAuth, CallbackRouter, CallbackRouterOptions } from "./src/http/callback_router.ts";
export type {
  Handler,
  HandlerDefinition,
  HandlerEntry,
  HandlerMap,
  HandlerResult,
} from "./src/worker/handlers.ts";
export type {
  AnyTasks,
  ArgsIssue,
  EnqueueRest,
  SchemaMap,
  Task,
  TaskArgs,
  TaskInput,
  TaskKind,
  TaskResult,
  TaskSchemas,
} from "./src/tasks.ts";
export type * from "./src/standard_schema.ts";
export { defaultBackoff } from "./src/worker/handlers.ts";
export type {
  IsolationLevel,
  JobContext,
  JobTransaction,
  JobTransactionOptions,
} from "./src/worker/job_context.ts";
export { PROGRESS_MAX_BYTES } from "./src/worker/job_context.ts";
export { CallbackEndedError } from "./src/worker/job_context.ts";
export type { WorkerEvents } from "./src/worker/events.ts";
export { silentLogger } from "./src/worker/logger.ts";
export { metricsText } from "./src/metrics/svc_metrics.ts";
export {
  CallbackNotFoundError,
  CallbackNotPendingError,
  ConnectTimeoutError,
  CronNotFoundError,
  InvalidStateError,
  JobNotFoundError,
  LeaseLostError,
  QueueNotFoundError,
  SchemaOutdatedError,
  snooze,
  SvcError,
  TerminalError,
  UniqueConflictError,
  ValidationError,
} from "./src/errors.ts";
export type { Snooze } from "./src/errors.ts";
export { SchemaTooNewError, SqlTooNewError } from "./src/db/migrate.ts";
export { EXPECTED_SCHEMA_VERSION } from "./src/db/schema_version.ts";
export * from "./src/contract/mod.ts";
export * from "./src/types.ts";

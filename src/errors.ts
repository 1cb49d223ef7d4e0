/**
 * Errors users meet, each with a stable `code` (the REST API's `code` field and the CLI's exit rules
 * come from it; see `src/http/errors.ts`).
 */

/** Base class: every svc error has a machine-readable code. */
export class SvcError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
    this.name = "SvcError";
  }
}

/**
 * Bad input: an enqueue option out of range, args not an object or refused by their kind's schema, a
 * malformed id. Nothing was written.
 */
export class ValidationError extends SvcError {
  /** Args refused by their kind's schema: each problem with its path in the args (`[]`: the args object). */
  readonly issues?: { path: (string | number)[]; message: string }[];

  constructor(message: string, issues?: { path: (string | number)[]; message: string }[]) {
    super(message, "invalid_request");
    this.name = "ValidationError";
    if (issues) this.issues = issues;
  }
}

/** Throw from a handler to fail the job for good, whatever attempts remain. */
export class TerminalError extends Error {
  constructor(message = "terminal error") {
    super(message);
    this.name = "TerminalError";
  }
}

/** A unique job with the same key is still in a non-terminal state (`onConflict: "error"`). */
export class UniqueConflictError extends SvcError {
  constructor(readonly existingJobId: number, key: string) {
    super(
      `a job with unique key ${key} already exists (job ${existingJobId}) and is not finished`,
      "unique_conflict",
    );
    this.name = "UniqueConflictError";
  }
}

/** The job's state does not allow the change (retry of a running job, cancel of a finished one). */
export class InvalidStateError extends SvcError {
  constructor(message: string) {
    super(message, "invalid_state");
    this.name = "InvalidStateError";
  }
}

/**
 * `ctx.transaction` could not complete the job: its attempt is no longer the job's current one (the job
 * was cancelled, rescued by the leader after a stale heartbeat or a passed deadline, or ended by another
 * writer). Nothing of the transaction was committed: neither the handler's own statements nor its
 * follow-up jobs. The handler may simply return or rethrow: the attempt's outcome is someone else's now.
 */
export class LeaseLostError extends SvcError {
  constructor(readonly jobId: number, readonly lease: number, message?: string) {
    super(
      message ??
        `job ${jobId}: attempt (lease ${lease}) is no longer the job's current one; the transaction was rolled back`,
      "lease_lost",
    );
    this.name = "LeaseLostError";
  }
}

/** No job with that id. */
export class JobNotFoundError extends SvcError {
  constructor(id: number) {
    super(`job ${id} not found`, "not_found");
    this.name = "JobNotFoundError";
  }
}

/** No cron schedule with that name. */
export class CronNotFoundError extends SvcError {
  constructor(name: string) {
    super(`cron schedule ${JSON.stringify(name)} not found`, "not_found");
    this.name = "CronNotFoundError";
  }
}

/** No queue of that name: no `queues` row, no job, and no live runtime serving it. */
export class QueueNotFoundError extends SvcError {
  constructor(readonly queue: string) {
    super(
      `queue ${
        JSON.stringify(queue)
      } not found: it has no jobs, was never paused, and no live worker serves it`,
      "not_found",
    );
    this.name = "QueueNotFoundError";
  }
}

/** No callback with that id. */
export class CallbackNotFoundError extends SvcError {
  constructor(id: string) {
    super(`callback ${id} not found`, "callback_not_found");
    this.name = "CallbackNotFoundError";
  }
}

/** The callback exists but was already resolved, superseded, expired, or its job was cancelled. */
export class CallbackNotPendingError extends SvcError {
  constructor(id: string, readonly jobState: string | null) {
    super(
      `callback ${id} is no longer pending (already resolved, superseded by a later attempt, past its deadline, ` +
        `or its job is ${jobState ?? "gone"})`,
      "callback_not_pending",
    );
    this.name = "CallbackNotPendingError";
  }
}

/**
 * No PostgreSQL answered within the connect deadline: the address refused, stayed silent, or answered
 * but is not PostgreSQL (postgres.js would retry such an address forever).
 */
export class ConnectTimeoutError extends SvcError {
  constructor(readonly target: string, readonly timeoutMs: number, fix: string) {
    super(
      `no PostgreSQL answered at ${target} within ${
        timeoutMs / 1000
      } s (the address refused, stayed silent, ` +
        `or answered but is not PostgreSQL); check ${fix}`,
      "connect_timeout",
    );
    this.name = "ConnectTimeoutError";
  }
}

/** The database schema is older than this binary expects. */
export class SchemaOutdatedError extends SvcError {
  constructor(current: number | null, expected: number) {
    super(
      current === null
        ? `svc is not installed in this database (schema missing); run \`svc migrate\` first`
        : `database schema version ${current} is older than this svc expects (${expected}); run \`svc migrate\``,
      "schema_outdated",
    );
    this.name = "SchemaOutdatedError";
  }
}

/** Returned by a handler to run the job again later without spending an attempt. */
export interface Snooze {
  readonly snoozeMs: number;
}

/** `return snooze(5000)` from a handler: scheduled again in 5 s, the attempt given back. */
export function snooze(ms: number): Snooze {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new ValidationError("snooze(ms): ms must be a finite number >= 0");
  }
  return { snoozeMs: ms };
}

/** Whether a handler's return value is a snooze. */
export function isSnooze(v: unknown): v is Snooze {
  try {
    return typeof v === "object" && v !== null && "snoozeMs" in v && Object.keys(v).length === 1;
  } catch {
    return false; // a Proxy whose traps throw is no snooze
  }
}

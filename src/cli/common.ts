/**
 * CLI conventions: `--database-url` before the command or on it, else DATABASE_URL; exit 0 success,
 * 1 failure, 2 usage error; one-line errors on stderr that name the fix; `--json` in snake_case.
 */
import { type Command, InvalidArgumentError } from "npm:commander@14.0.3";
import { type Client, createClient } from "../client/client.ts";
import { connectWithin, ping, poolTarget } from "../db/connection.ts";
import type { AdminLimits } from "../db/admin_guard.ts";
import { env } from "../platform/platform.ts";
import {
  CronNotFoundError,
  JobNotFoundError,
  QueueNotFoundError,
  SvcError,
  ValidationError,
} from "../errors.ts";
import { checkJobCursor, parseJsonInput, parseRfc3339 } from "../validation.ts";
import { validateQueueName } from "../client/enqueue_input.ts";
import { validateCronName } from "../cron/definition.ts";
import { schemaNames } from "../db/names.ts";

/** A failure the user can fix; printed as `error: <message>`, exit 1. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
    this.name = "CliError";
  }
}

/** A usage error (exit 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
  }
}

/** Default `--connect-timeout`, in seconds. */
export const DEFAULT_CONNECT_TIMEOUT = 5;

/** The `--connect-timeout` option (no commander default: the program's value must not be shadowed). */
export function connectTimeoutOption(cmd: Command): Command {
  return cmd.option(
    "--connect-timeout <seconds>",
    `give up when no PostgreSQL has answered after this long (1 to 300; default ${DEFAULT_CONNECT_TIMEOUT})`,
    intArg("--connect-timeout", 1, 300),
  );
}

/** Default `--statement-timeout`, in seconds. */
export const DEFAULT_STATEMENT_TIMEOUT = 30;

/** The `--statement-timeout` option (no commander default, like `--connect-timeout`). */
export function statementTimeoutOption(cmd: Command): Command {
  return cmd.option(
    "--statement-timeout <seconds>",
    "give up on an admin read or change that runs longer than this (1 to 3600; default: env " +
      `SERVICE_STATEMENT_TIMEOUT, else ${DEFAULT_STATEMENT_TIMEOUT}; migrate and storage steps are not limited)`,
    intArg("--statement-timeout", 1, 3600),
  );
}

/** `--statement-timeout` of the command or the program, else SERVICE_STATEMENT_TIMEOUT, else 30 (seconds). */
export function statementTimeoutOf(cmd: Command): number {
  const flag = cmd.optsWithGlobals().statementTimeout;
  if (flag !== undefined) return flag;
  const v = env("SERVICE_STATEMENT_TIMEOUT");
  if (v === undefined) return DEFAULT_STATEMENT_TIMEOUT;
  if (!/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > 3600) {
    throw new UsageError(`SERVICE_STATEMENT_TIMEOUT must be 1 to 3600 seconds, got ${JSON.stringify(v)}`);
  }
  return Number(v);
}

/** The admin limits of a command's pool (`src/db/admin_guard.ts`). */
function adminLimits(cmd: Command, scope: AdminLimits["scope"], maxConcurrent: number): AdminLimits {
  const statementTimeoutMs = statementTimeoutOf(cmd) * 1000;
  return {
    statementTimeoutMs,
    maxConcurrent,
    // A command runs its statements one after the other: it waits its turn. A server answers 503 busy.
    waitMs: scope === "always" ? 10 * statementTimeoutMs : SERVE_BUSY_WAIT_MS,
    scope,
    timeoutFix: "--statement-timeout (SERVICE_STATEMENT_TIMEOUT)",
  };
}

/** How long a request of `svc serve` waits for room on the pool before it is answered 503 `busy`. */
export const SERVE_BUSY_WAIT_MS = 2_000;

/** Wraps a check that throws into a commander parser: a bad value is a usage error (exit 2). */
export function argParser<T>(check: (v: string) => T): (v: string) => T {
  return (v) => {
    try {
      return check(v);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message);
    }
  };
}

/** A PostgreSQL URL (`postgres://` or `postgresql://`); the message never repeats it (it may hold a password). */
function checkDatabaseUrl(v: string, what: string): string {
  let protocol = "";
  try {
    protocol = new URL(v).protocol;
  } catch { /* not a URL */ }
  if (protocol !== "postgres:" && protocol !== "postgresql:") {
    throw new ValidationError(`${what} must be a PostgreSQL URL such as postgres://user@host:5432/db`);
  }
  return v;
}

/** Parsers of option values that the CLI shares (each bad value exits 2). */
export const queueArg: (v: string) => string = argParser(validateQueueName);
export const cronNameArg: (v: string) => string = argParser(validateCronName);
export const cursorArg: (v: string) => string = argParser(checkJobCursor);
export const schemaArg: (v: string) => string = argParser((v) => schemaNames(v).schema);
export const kindArg: (v: string) => string = argParser((v) => {
  if (v.length < 1 || v.length > 255) throw new ValidationError("kind must be 1 to 255 characters");
  return v;
});

/** The `--database-url` and `--schema` options (of the program, and of each command that connects). */
export function dbOptions(cmd: Command): Command {
  return cmd
    .option("--database-url <url>", "PostgreSQL URL (default: env DATABASE_URL)")
    .option("--schema <name>", "Postgres schema of svc (default: svc, or env SERVICE_SCHEMA)", schemaArg);
}

/** Adds the shared connection options to a command. */
export function withDb(cmd: Command): Command {
  return statementTimeoutOption(connectTimeoutOption(dbOptions(cmd)));
}

/** `--schema` of the command or the program, else SERVICE_SCHEMA (a bad one is a usage error), else undefined. */
export function schemaOf(cmd: Command): string | undefined {
  const flag = cmd.optsWithGlobals().schema;
  if (flag !== undefined) return flag;
  const v = env("SERVICE_SCHEMA");
  if (v === undefined) return undefined;
  try {
    return schemaNames(v).schema;
  } catch (e) {
    throw new UsageError(`SERVICE_SCHEMA: ${(e as Error).message}`);
  }
}

/** `--connect-timeout` of the command or the program, in seconds. */
export function connectTimeoutOf(cmd: Command): number {
  return cmd.optsWithGlobals().connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
}

/**
 * Opens the client's first connection within `--connect-timeout`: an address that answers but is not
 * PostgreSQL would otherwise keep a command waiting for ever. A refused or failed connection throws as
 * the driver reports it; the deadline throws a ConnectTimeoutError naming the fix.
 */
export async function connectCli(client: Client, cmd: Command): Promise<void> {
  await connectWithin(ping(client.db), {
    timeoutMs: connectTimeoutOf(cmd) * 1000,
    target: poolTarget(client.sql),
    fix: "--database-url / DATABASE_URL and that PostgreSQL is running there (or raise --connect-timeout)",
    end: () => client.sql.end({ timeout: 0 }),
  });
}

/** The database URL from the command, the program, or DATABASE_URL. */
export function databaseUrl(cmd: Command): string {
  // Checked here rather than by commander, whose message would repeat the value (and its password).
  const flag = cmd.optsWithGlobals().databaseUrl;
  const url = flag || env("DATABASE_URL");
  if (!url) {
    throw new UsageError("no database: pass --database-url postgres://user@host:5432/db or set DATABASE_URL");
  }
  try {
    return checkDatabaseUrl(url, flag ? "--database-url" : "DATABASE_URL");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/**
 * A one-connection client for an operator command (docs/reference/cli.md). The driver's own connect
 * timeout is a second longer than `--connect-timeout`, so that the deadline of `connectCli` speaks first.
 */
export function cliClient(cmd: Command, opts: { limited?: boolean } = {}): Client {
  return createClient({
    databaseUrl: databaseUrl(cmd),
    schema: schemaOf(cmd),
    maxConnections: 1,
    connectTimeout: connectTimeoutOf(cmd) + 1,
    ...(opts.limited === false ? {} : { adminLimits: adminLimits(cmd, "always", 1) }),
  });
}

/**
 * Runs `fn` with a client and closes it. Connection failures become one line naming the fix. Its
 * statements run under `--statement-timeout` unless `limited: false` (migrate, storage steps).
 */
export async function withClient<T>(
  cmd: Command,
  fn: (c: Client) => Promise<T>,
  opts: { limited?: boolean } = {},
): Promise<T> {
  const client = cliClient(cmd, opts);
  try {
    await connectCli(client, cmd);
    return await fn(client);
  } catch (e) {
    throw toCliError(e);
  } finally {
    await client.close().catch(() => {});
  }
}

/** Maps any error to a CliError with one line. */
export function toCliError(e: unknown): CliError {
  if (e instanceof CliError) return e;
  if (e instanceof JobNotFoundError) return new CliError(`${e.message}; check the id with \`svc job list\``);
  if (e instanceof QueueNotFoundError) {
    return new CliError(
      `${e.message}; check the name with \`svc queue list\`, or pass --create to act on it ahead of its first job`,
    );
  }
  if (e instanceof CronNotFoundError) {
    return new CliError(`${e.message}; list the schedules with \`svc cron list\``);
  }
  if (e instanceof SvcError) return new CliError(e.message, e.code === "storage_locked" ? 3 : 1);
  const err = e as { code?: string; message?: string; errno?: string };
  const msg = String(err?.message ?? e).split("\n")[0];
  if (
    [
      "ECONNREFUSED",
      "CONNECT_TIMEOUT",
      "ENOTFOUND",
      "EHOSTUNREACH",
      "CONNECTION_CLOSED",
      "EPIPE",
      "ECONNRESET",
    ].includes(err?.code ?? "") ||
    /connect|ECONNREFUSED|timeout/i.test(msg)
  ) {
    return new CliError(
      `cannot reach the database (${msg}); check --database-url / DATABASE_URL and that PostgreSQL is running`,
    );
  }
  if (err?.code === "3F000" || err?.code === "42P01" || err?.code === "42883") {
    return new CliError(`svc is not installed in this database (${msg}); run \`svc migrate\` first`);
  }
  return new CliError(msg);
}

/** Prints JSON (pretty) on stdout. */
export function printJson(v: unknown): void {
  console.log(JSON.stringify(v, null, 2));
}

/** An argument parser for an integer option in [min, max] (a bad value is a usage error, exit 2). */
export function intArg(name: string, min: number, max: number): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!/^-?\d+$/.test(v) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
}

/**
 * An argument parser for a JSON object (`--args '{"to":"a@example.com"}'`), under the input rules of
 * the HTTP API: nothing PostgreSQL cannot store, no number a double would change.
 */
export function jsonObjectArg(name: string): (v: string) => Record<string, unknown> {
  return (v) => parseJsonObject(name, v);
}

/** `v` as a JSON object; an InvalidArgumentError naming `name` otherwise. */
export function parseJsonObject(name: string, v: string): Record<string, unknown> {
  const parsed = parseJsonInput(v);
  if (!parsed.ok) {
    throw new InvalidArgumentError(
      parsed.syntax
        ? `${name} is ${parsed.problem}; pass an object such as '{"to":"a@example.com"}'`
        : `${name}: ${parsed.problem}`,
    );
  }
  const o = parsed.value;
  if (typeof o !== "object" || o === null || Array.isArray(o)) {
    throw new InvalidArgumentError(`${name} must be a JSON object such as '{"to":"a@example.com"}'`);
  }
  return o as Record<string, unknown>;
}

/** An argument parser for an RFC 3339 time with a zone (`2026-12-01T09:00:00Z`) of a day that exists. */
export function timeArg(name: string): (v: string) => Date {
  return (v) => {
    const d = parseRfc3339(v);
    if (d === null) {
      throw new InvalidArgumentError(
        `${name} must be an RFC 3339 time with a zone of a day that exists (years 0001 to 9999), ` +
          "e.g. 2026-12-01T09:00:00Z",
      );
    }
    return d;
  };
}

/** Prints rows as aligned columns under a header line (or `none` when there are no rows). */
export function printTable(headers: string[], rows: (string | number | null)[][], none = "(none)"): void {
  if (rows.length === 0) return console.log(none);
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === null ? "-" : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  for (const r of cells) {
    console.log(r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join("  ").trimEnd());
  }
}

/** A time for people: RFC 3339 to the second, or `-`. */
export function timeText(d: Date | null): string {
  return d ? new Date(d).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

/** Default `--pool-max` of the serving commands (docs/reference/cli.md, `svc serve`). */
export const DEFAULT_POOL_MAX = 10;

/** Parser of `--pool-max` (and of SERVICE_POOL_MAX): an integer from 1 to 1000. */
export function poolSizeOption(v: string, what = "--pool-max"): number {
  if (!/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > 1000) {
    throw new InvalidArgumentError(`${what} must be an integer from 1 to 1000, got ${JSON.stringify(v)}`);
  }
  return Number(v);
}

/**
 * The pool of a serving command (`serve`, `callbacks serve`): `--pool-max`, else SERVICE_POOL_MAX,
 * else 10 connections; open its first connection with `connectCli`.
 */
export function servingClient(cmd: Command, poolMax: number | undefined): Client {
  let size = poolMax;
  if (size === undefined) {
    try {
      size = poolSizeOption(env("SERVICE_POOL_MAX") ?? String(DEFAULT_POOL_MAX), "SERVICE_POOL_MAX");
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  return createClient({
    databaseUrl: databaseUrl(cmd),
    schema: schemaOf(cmd),
    maxConnections: size,
    connectTimeout: connectTimeoutOf(cmd) + 1,
    // Admin requests leave a connection to the callback receiver on the same pool.
    adminLimits: adminLimits(cmd, "requests", Math.max(1, size - 1)),
  });
}

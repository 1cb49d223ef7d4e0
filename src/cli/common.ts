/**
 * CLI conventions: `--database-url` before the command or on it, else DATABASE_URL; exit 0 success,
 * 1 failure, 2 usage error; one-line errors on stderr that name the fix; `--json` in snake_case.
 */
import type { Command } from "commander";
import { createClient, type Client } from "../client/client.ts";
import { env } from "../runtime/runtime.ts";
import { SvcError } from "../errors.ts";

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

/** Adds the shared connection options to a command. */
export function withDb(cmd: Command): Command {
  return cmd
    .option("--database-url <url>", "PostgreSQL URL (default: env DATABASE_URL)")
    .option("--schema <name>", "Postgres schema of svc (default: svc, or env SERVICE_SCHEMA)");
}

/** The database URL from the command, the program, or DATABASE_URL. */
export function databaseUrl(cmd: Command): string {
  const url = cmd.optsWithGlobals().databaseUrl ?? env("DATABASE_URL");
  if (!url) {
    throw new UsageError("no database: pass --database-url postgres://user@host:5432/db or set DATABASE_URL");
  }
  return url;
}

/** A one-connection client for an operator command (contract section 8). */
export function cliClient(cmd: Command, connectTimeout = 5): Client {
  const o = cmd.optsWithGlobals();
  return createClient({
    databaseUrl: databaseUrl(cmd),
    schema: o.schema ?? env("SERVICE_SCHEMA"),
    maxConnections: 1,
    connectTimeout,
  });
}

/** Runs `fn` with a client and closes it. Connection failures become one line naming the fix. */
export async function withClient<T>(cmd: Command, fn: (c: Client) => Promise<T>): Promise<T> {
  const client = cliClient(cmd);
  try {
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
  if (e instanceof SvcError) return new CliError(e.message);
  const err = e as { code?: string; message?: string; errno?: string };
  const msg = String(err?.message ?? e).split("\n")[0];
  if (
    ["ECONNREFUSED", "CONNECT_TIMEOUT", "ENOTFOUND", "EHOSTUNREACH", "CONNECTION_CLOSED"].includes(err?.code ?? "") ||
    /connect|ECONNREFUSED|timeout/i.test(msg)
  ) {
    return new CliError(`cannot reach the database (${msg}); check --database-url / DATABASE_URL and that PostgreSQL is running`);
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

#!/usr/bin/env -S deno run -A
/**
 * `svc`: the operator CLI. Each command group lives in `src/cli/<group>.ts`.
 *
 * @module
 */
import { Command, CommanderError } from "npm:commander@14.0.3";
import {
  CliError,
  connectTimeoutOption,
  dbOptions,
  statementTimeoutOption,
  toCliError,
} from "./src/cli/common.ts";
import { migrateCommand } from "./src/cli/migrate.ts";
import { serveCommand } from "./src/cli/serve.ts";
import { callbacksCommand } from "./src/cli/callbacks.ts";
import { healthCommand } from "./src/cli/health.ts";
import { jobCommand } from "./src/cli/job.ts";
import { queueCommand } from "./src/cli/queue.ts";
import { cronCommand } from "./src/cli/cron.ts";
import { storageCommand } from "./src/cli/storage.ts";
import { devCommand } from "./src/cli/dev.ts";
import { args, eprintln, exit } from "./src/platform/platform.ts";
import denoJson from "./deno.json" with { type: "json" };

/** Builds the `svc` program (exported for tests and embedding). */
export function buildProgram(): Command {
  const program = statementTimeoutOption(connectTimeoutOption(
    dbOptions(
      new Command("svc")
        .description("svc: a PostgreSQL job queue — operator CLI")
        .version(denoJson.version),
    ),
  ))
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  program.addCommand(migrateCommand());
  program.addCommand(callbacksCommand());
  program.addCommand(serveCommand());
  program.addCommand(healthCommand());
  program.addCommand(jobCommand());
  program.addCommand(queueCommand());
  program.addCommand(cronCommand());
  program.addCommand(storageCommand());
  program.addCommand(devCommand());
  return program;
}

/** Runs the CLI with `argv` (without the executable); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  program.commands.forEach(function override(c: Command) {
    c.exitOverride();
    c.commands.forEach(override);
  });
  try {
    await program.parseAsync(argv, { from: "user" });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (
        e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help"
      ) {
        return 0;
      }
      return 2; // commander already printed the one-line error
    }
    const err = e instanceof CliError ? e : toCliError(e);
    eprintln(`error: ${err.message}`);
    return err.exitCode;
  }
}

if (import.meta.main) exit(await main(args()));

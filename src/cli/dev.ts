/**
 * `svc dev`: the whole system in one command, for trying svc and for local development. The UI and
 * the admin API of `svc serve`, a worker with example handlers, an HTTP worker pointed at a built-in
 * function endpoint, one cron schedule and a trickle of example jobs, on DATABASE_URL or, without one,
 * on PostgreSQL embedded in this process (PGlite, data in ./.svc-data). Ctrl-C stops it.
 */
import { Command } from "commander";
import { startDev } from "../dev/dev.ts";
import { env, eprintln, exit, onShutdownSignal } from "../runtime/runtime.ts";
import { connectTimeoutOf, intArg, schemaOf, toCliError, UsageError, withDb } from "./common.ts";

/** A database URL without its password, for printing. */
function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname}`;
  } catch {
    return "the given database";
  }
}

export function devCommand(): Command {
  return withDb(new Command("dev"))
    .description(
      "run a worker, the UI and an example HTTP function with a trickle of example jobs " +
        "(on DATABASE_URL, else on an embedded PostgreSQL in --data-dir)",
    )
    .option("--port <port>", "port of the UI and API (0 picks a free one)", intArg("--port", 0, 65535), 3000)
    .option("--data-dir <dir>", "folder of the embedded database (without a database URL)", ".svc-data")
    .option("--fresh", "delete the embedded database first and start over")
    .option(
      "--every <seconds>",
      "enqueue a batch of example jobs this often (0: only at start)",
      intArg("--every", 0, 3600),
      5,
    )
    .addHelpText(
      "after",
      "\nThe embedded database is for trying svc and local development: one process, not production.",
    )
    .action(async (o, cmd: Command) => {
      const g = cmd.optsWithGlobals();
      const databaseUrl: string | undefined = g.databaseUrl ?? env("DATABASE_URL");
      if (o.fresh && databaseUrl) {
        throw new UsageError(
          "--fresh deletes the embedded database; with --database-url / DATABASE_URL svc dev uses that " +
            "PostgreSQL as it is (drop its schema yourself to start over)",
        );
      }
      let dev;
      try {
        dev = await startDev({
          databaseUrl,
          schema: schemaOf(cmd),
          dataDir: o.dataDir,
          fresh: o.fresh === true,
          port: o.port,
          everyMs: o.every * 1000,
          connectTimeout: connectTimeoutOf(cmd) * 1000,
        });
      } catch (e) {
        throw toCliError(e);
      }
      if (dev.database === "postgres") {
        console.log(`svc dev: PostgreSQL at ${shownUrl(databaseUrl!)}, schema ${dev.client.schema}`);
      }
      console.log(`svc dev: open ${dev.url} (UI; API under ${dev.url}api; Ctrl-C stops)`);
      // Ctrl-C under `deno task` delivers SIGINT twice (the terminal's and the one deno task forwards):
      // repeats within a second are the same Ctrl-C; a later one stops at once.
      let first = 0;
      let off = () => {};
      await new Promise<void>((resolve) => {
        off = onShutdownSignal(() => {
          if (!first) {
            first = Date.now();
            resolve();
          } else if (Date.now() - first > 1000) {
            eprintln("svc dev: stopped at once (a second Ctrl-C)");
            exit(130);
          }
        });
      });
      console.log("svc dev: stopping (Ctrl-C again to stop at once)");
      try {
        await dev.stop();
      } finally {
        off();
      }
      console.log("svc dev: stopped");
    });
}

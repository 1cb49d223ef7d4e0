/**
 * `svc dev`: the whole system in one command, for trying svc and for local development. The UI and
 * the admin API of `svc serve`, a worker with example handlers, an HTTP worker pointed at a built-in
 * function endpoint, one cron schedule and a trickle of example jobs, on DATABASE_URL or, without one,
 * on a PostgreSQL server of its own (binaries from npm, data in ./.svc-data) whose DATABASE_URL it
 * prints for other processes. Ctrl-C stops it.
 */
import { Command } from "npm:commander@14.0.3";
import { type Dev, startDev } from "../dev/dev.ts";
import { EmbeddedPostgresError, killEmbeddedServers } from "../dev/embedded_postgres.ts";
import { env, eprintln, exit, onShutdownSignal, singleBinary } from "../platform/platform.ts";
import { CliError, connectTimeoutOf, intArg, schemaOf, toCliError, UsageError, withDb } from "./common.ts";

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
        "(on DATABASE_URL, else on a PostgreSQL server of its own with its data in --data-dir)",
    )
    .option("--port <port>", "port of the UI and API (0 picks a free one)", intArg("--port", 0, 65535), 3000)
    .option(
      "--data-dir <dir>",
      "folder of the embedded PostgreSQL: data, binaries, log (without a database URL)",
      ".svc-data",
    )
    .option("--fresh", "delete the embedded PostgreSQL's data first and start over")
    .option(
      "--pg-port <port>",
      "port of the embedded PostgreSQL on 127.0.0.1 (default: the last run's when free, else a free one)",
      intArg("--pg-port", 1, 65535),
    )
    .option(
      "--every <seconds>",
      "enqueue a batch of example jobs this often (0: only at start)",
      intArg("--every", 0, 3600),
      5,
    )
    .addHelpText(
      "after",
      "\nThe embedded PostgreSQL is for trying svc and local development, not for production. " +
        "It prints its DATABASE_URL=... line\nfor other processes (svc job list, svc serve, your worker, psql).",
    )
    .action(async (o, cmd: Command) => {
      const g = cmd.optsWithGlobals();
      const databaseUrl: string | undefined = g.databaseUrl ?? env("DATABASE_URL");
      if (databaseUrl && (o.fresh || o.pgPort !== undefined)) {
        throw new UsageError(
          `${o.fresh ? "--fresh" : "--pg-port"} is about the embedded PostgreSQL; with --database-url / ` +
            "DATABASE_URL svc dev uses that PostgreSQL as it is (drop its schema yourself to start over)",
        );
      }
      if (!databaseUrl && singleBinary()) {
        // The embedded PostgreSQL is an npm package of 25 MB that the single binaries do not hold.
        throw new CliError(
          "svc dev in a single binary needs a PostgreSQL server: set DATABASE_URL or pass --database-url " +
            "(the embedded PostgreSQL comes with the npm and JSR packages only)",
        );
      }
      // Signals count from the start: a Ctrl-C while the server starts stops everything once started.
      // Ctrl-C under `deno task` delivers SIGINT twice (the terminal's and the one deno task forwards):
      // repeats within a second are the same Ctrl-C; a later one stops at once.
      let first = 0;
      let signalled = () => {};
      const stopRequested = new Promise<void>((resolve) => signalled = resolve);
      const off = onShutdownSignal(() => {
        if (!first) {
          first = Date.now();
          signalled();
        } else if (Date.now() - first > 1000) {
          eprintln("svc dev: stopped at once (a second Ctrl-C)");
          killEmbeddedServers();
          exit(130);
        }
      });
      try {
        let dev: Dev;
        try {
          dev = await startDev({
            databaseUrl,
            schema: schemaOf(cmd),
            dataDir: o.dataDir,
            fresh: o.fresh === true,
            pgPort: o.pgPort,
            port: o.port,
            everyMs: o.every * 1000,
            connectTimeout: connectTimeoutOf(cmd) * 1000,
          });
        } catch (e) {
          throw e instanceof EmbeddedPostgresError ? new CliError(e.message) : toCliError(e);
        }
        if (dev.database === "postgres") {
          console.log(`svc dev: PostgreSQL at ${shownUrl(databaseUrl!)}, schema ${dev.client.schema}`);
        } else {
          console.log(
            "svc dev: other processes reach this PostgreSQL with the next line " +
              "(export it, then: svc job list, svc serve, your worker, psql)",
          );
          console.log(`DATABASE_URL=${dev.databaseUrl}`);
        }
        console.log(`svc dev: open ${dev.url} (UI; API under ${dev.url}api; Ctrl-C stops)`);
        await stopRequested;
        console.log("svc dev: stopping (Ctrl-C again to stop at once)");
        await dev.stop();
        console.log("svc dev: stopped");
      } finally {
        off();
      }
    });
}

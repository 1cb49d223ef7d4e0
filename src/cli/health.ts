/**
 * `svc health [--json]`: the cluster's health from the database alone (docs/reference/cli.md). Exit 0
 * ready; 1 unreachable or unmigrated, with the reason as the one-line error; 2 usage error. Fleet
 * counts are informational: a cluster with zero workers is still ready.
 */
import { Command } from "npm:commander@14.0.3";
import type { ClusterHealth } from "../types.ts";
import { ConnectTimeoutError } from "../errors.ts";
import { cliClient, CliError, connectCli, printJson, withDb } from "./common.ts";

/**
 * The report as `svc health` prints it, with the same figures as `--json`. The reason of a cluster that
 * is not ready is left out: the command prints it once, as its error line.
 */
export function healthText(h: ClusterHealth): string {
  const reached = h.postgres === "connected";
  const notCounted = !reached ? "the database was not reached" : "the schema could not be read";
  return [
    `ready: ${h.ready ? "yes" : "no"}`,
    `postgres: ${h.postgres}`,
    `schema version: ${h.schema_version ?? (reached ? "none (not installed)" : "unknown")} ` +
    `(binary expects >= ${h.expected_schema_version})`,
    `storage: ${h.ready ? h.storage : "unknown"}`,
    `live runtimes: ${h.live_runtimes} (${
      h.ready ? `${h.unhealthy_runtimes} unhealthy` : `not counted: ${notCounted}`
    })`,
    ...(h.pooler === "transaction" ? ["connection: through a transaction pooler"] : []),
    ...(h.reason && h.ready ? [`reason: ${h.reason}`] : []),
  ].join("\n");
}

export function healthCommand(): Command {
  return withDb(new Command("health"))
    .description(
      "report whether the cluster is ready: database reachable, schema migrated, storage, live workers",
    )
    .option("--json", "print the report as a JSON object")
    .addHelpText("after", "\nExit codes: 0 ready, 1 unreachable or not migrated, 2 usage error.")
    .action(async (o, cmd: Command) => {
      const client = cliClient(cmd);
      let report: ClusterHealth;
      try {
        // Past the deadline the pool is ended: the report then says unreachable, with the deadline's reason.
        const deadline = await connectCli(client, cmd).then(
          () => null,
          (e) => (e instanceof ConnectTimeoutError ? e : null),
        );
        report = await client.healthCheck();
        if (deadline) report = { ...report, reason: deadline.message };
      } finally {
        await client.close().catch(() => {});
      }
      if (o.json) printJson(report);
      else console.log(healthText(report));
      if (!report.ready) throw new CliError(report.reason ?? "not ready");
    });
}

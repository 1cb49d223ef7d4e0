/**
 * `svc storage status`: the active storage engine and the transition state. The transition
 * subcommands (`prepare`, `enter-mixed-transition`, `finalize`, `abort`) come with the
 * queue-storage engine.
 */
import { Command } from "npm:commander@14.0.3";
import { printJson, withClient, withDb } from "./common.ts";

function statusCommand(): Command {
  return withDb(new Command("status"))
    .description("show the active storage engine and the storage-transition state")
    .option("--json", "print JSON: {engine, transition}")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const s = await client.storageStatus();
        if (o.json) return printJson({ engine: s.engine, transition: s.transition });
        console.log(`engine: ${s.engine}`);
        console.log(`transition: ${s.transition}`);
      });
    });
}

/** `svc storage ...`. */
export function storageCommand(): Command {
  return new Command("storage")
    .description("storage engine and transition state")
    .addCommand(statusCommand());
}

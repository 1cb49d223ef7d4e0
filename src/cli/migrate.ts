/** `svc migrate [--status]`. */
import { Command } from "commander";
import { CliError, printJson, withClient, withDb } from "./common.ts";

export function migrateCommand(): Command {
  return withDb(new Command("migrate"))
    .description("apply the svc schema migrations (idempotent; safe to run concurrently)")
    .option(
      "--status",
      "print the current and expected schema version instead of migrating; exit 1 while migrations are pending",
    )
    .option("--json", "print JSON")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        if (o.status) {
          const s = await client.schemaStatus();
          const out = {
            current_version: s.current,
            expected_version: s.expected,
            up_to_date: s.current === s.expected,
          };
          const pending = s.current === null || s.current < s.expected;
          if (o.json) printJson(out);
          else {
            console.log(`schema version: ${s.current ?? "none (not installed)"}`);
            console.log(`expected version: ${s.expected}`);
            console.log(
              pending
                ? "status: migrations pending; run `svc migrate`"
                : s.current! > s.expected
                ? "status: database is newer than this svc (workers still run; upgrade svc before migrating)"
                : "status: up to date",
            );
          }
          // Exit 1 while migrations are pending, so that a deploy can gate on it.
          if (pending) throw new CliError("migrations pending: run `svc migrate`");
          return;
        }
        const r = await client.migrate();
        if (o.json) return printJson({ from_version: r.from, to_version: r.to, applied: r.applied });
        console.log(
          r.applied.length
            ? `migrated schema ${client.schema} from version ${r.from} to ${r.to}`
            : `schema ${client.schema} already at version ${r.to}; nothing to do`,
        );
      });
    });
}

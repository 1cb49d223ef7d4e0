/** `svc migrate [--status] [--engine E] [--qs-schema S] [--qs-slots N] [--qs-rotation-interval S]`. */
import { Command, InvalidArgumentError } from "npm:commander@14.0.3";
import { EngineMismatchError, QsParamsMismatchError } from "../db/migrate.ts";
import { CliError, intArg, printJson, UsageError, withClient, withDb } from "./common.ts";
import { validateSchemaName } from "../db/names.ts";

function engineArg(v: string): "canonical" | "queue_storage" {
  if (v !== "canonical" && v !== "queue_storage") {
    throw new InvalidArgumentError("--engine must be canonical or queue_storage");
  }
  return v;
}

function schemaArg(v: string): string {
  try {
    return validateSchemaName(v);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

export function migrateCommand(): Command {
  return withDb(new Command("migrate"))
    .description("apply the svc schema migrations (idempotent; safe to run concurrently)")
    .option(
      "--status",
      "print the current and expected schema version instead of migrating; exit 1 while migrations are pending",
    )
    .option("--json", "print JSON")
    .option(
      "--engine <engine>",
      "storage engine of a new database: queue_storage (default) or canonical (the older line); " +
        "on an installed database it must match the engine it runs",
      engineArg,
    )
    .option(
      "--qs-schema <name>",
      "queue-storage schema (default: <schema>_qs), recorded when first installed",
      schemaArg,
    )
    .option("--qs-slots <n>", "ring slots of queue storage (default 8)", intArg("--qs-slots", 3, 64))
    .option(
      "--qs-rotation-interval <seconds>",
      "how often the leader rotates the queue-storage ring (default 30)",
      intArg("--qs-rotation-interval", 1, 86_400),
    )
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
        let r;
        try {
          r = await client.migrate({
            engine: o.engine,
            qsSchema: o.qsSchema,
            qsSlots: o.qsSlots,
            qsRotationIntervalMs: o.qsRotationInterval === undefined
              ? undefined
              : o.qsRotationInterval * 1000,
          });
        } catch (e) {
          if (e instanceof EngineMismatchError || e instanceof QsParamsMismatchError) {
            throw new UsageError(e.message);
          }
          throw e;
        }
        if (o.json) {
          return printJson({ from_version: r.from, to_version: r.to, applied: r.applied, engine: r.engine });
        }
        console.log(
          r.applied.length
            ? `migrated schema ${client.schema} from version ${r.from} to ${r.to} (storage engine ${r.engine})`
            : `schema ${client.schema} already at version ${r.to}; nothing to do (storage engine ${r.engine})`,
        );
      }, { limited: false });
    });
}

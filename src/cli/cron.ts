/** `svc cron list|add|trigger|pause|resume|remove`. */
import { Command, InvalidArgumentError } from "npm:commander@14.0.3";
import type { CronSchedule } from "../cron/definition.ts";
import { cronToJson } from "../wire.ts";
import { validateSchedule } from "../cron/schedule.ts";
import { jobToJson } from "../wire.ts";
import {
  cronNameArg,
  intArg,
  jsonObjectArg,
  kindArg,
  printJson,
  printTable,
  queueArg,
  timeText,
  withClient,
  withDb,
} from "./common.ts";

/** Checks a cron expression (or, with `zone`, a time zone) while parsing: a bad one is a usage error. */
function scheduleArg(zone: boolean): (v: string) => string {
  return (v) => {
    try {
      if (zone) validateSchedule("0 0 * * *", v);
      else validateSchedule(v);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message);
    }
    return v;
  };
}

function printSchedule(c: CronSchedule, json: boolean, verb: string): void {
  if (json) return printJson({ cron: cronToJson(c) });
  console.log(`cron ${c.name} ${verb}; next fire: ${timeText(c.nextFireAt)}`);
}

function listCommand(): Command {
  return withDb(new Command("list"))
    .description("every cron schedule in the database, whichever deployment declared it")
    .option(
      "--json",
      "print JSON: {cron: [{name, schedule, kind, args, queue, timezone, paused, last_fire_at, next_fire_at, ...}]}",
    )
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const all = await client.listCron();
        if (o.json) return printJson({ cron: all.map(cronToJson) });
        printTable(
          [
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "KIND",
            "QUEUE",
            "PAUSED",
            "LAST FIRE",
            "NEXT FIRE",
            "DECLARED BY",
          ],
          all.map((c) => [
            c.name,
            c.schedule,
            c.timezone,
            c.kind,
            c.queue,
            c.paused ? "yes" : "no",
            timeText(c.lastFireAt),
            timeText(c.nextFireAt),
            c.declaredBy,
          ]),
          "no cron schedules (declare them with the worker's `cron` option or `svc cron add`)",
        );
      });
    });
}

function addCommand(): Command {
  return withDb(new Command("add"))
    .description("create or replace a schedule (a worker declaring the same name replaces it at its start)")
    .argument("<name>", "schedule name (A-Z a-z 0-9 _ . : -)", cronNameArg)
    .requiredOption(
      "--schedule <expr>",
      'cron expression: 5 fields, or 6 with leading seconds, e.g. "0 3 * * *"',
      scheduleArg(false),
    )
    .requiredOption("--kind <kind>", "job kind to enqueue at each fire", kindArg)
    .option("--args <json>", "the job's args, a JSON object", jsonObjectArg("--args"), {})
    .option("--queue <queue>", "queue of the jobs", queueArg, "default")
    .option("--timezone <zone>", "IANA time zone the expression is read in", scheduleArg(true), "UTC")
    .option("--priority <n>", "1 (highest) to 4", intArg("--priority", 1, 4), 2)
    .option("--max-attempts <n>", "attempts per job (1 to 1000)", intArg("--max-attempts", 1, 1000), 25)
    .option(
      "--catch-up <n>",
      "missed fires to enqueue after downtime (0 coalesces them into one)",
      intArg("--catch-up", 0, 1000),
      0,
    )
    .option("--json", "print the schedule as JSON")
    .addHelpText(
      "after",
      `\nExample:\n  svc cron add nightly-report --schedule "0 3 * * *" --timezone Europe/Berlin --kind report --args '{"full":true}'`,
    )
    .action(async (name: string, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const c = await client.addCron(name, {
          schedule: o.schedule,
          kind: o.kind,
          args: o.args,
          queue: o.queue,
          timezone: o.timezone,
          priority: o.priority,
          maxAttempts: o.maxAttempts,
          catchUp: o.catchUp,
        }, { declaredBy: "cli" });
        printSchedule(c, o.json === true, "saved");
      });
    });
}

function triggerCommand(): Command {
  return withDb(new Command("trigger"))
    .description("enqueue the schedule's job now (its fire times are unchanged; works while paused)")
    .argument("<name>", "schedule name", cronNameArg)
    .option("--json", "print the job as JSON")
    .action(async (name: string, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const job = await client.triggerCron(name);
        if (o.json) return printJson({ job: jobToJson(job) });
        console.log(`cron ${name}: enqueued job ${job.id} (${job.kind} on queue ${job.queue})`);
      });
    });
}

function pauseResume(verb: "pause" | "resume"): Command {
  return withDb(new Command(verb))
    .description(
      verb === "pause"
        ? "stop enqueuing the schedule's jobs"
        : "enqueue the schedule's jobs again (fire times that passed while paused are skipped)",
    )
    .argument("<name>", "schedule name", cronNameArg)
    .option("--json", "print the schedule as JSON")
    .action(async (name: string, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const c = await (verb === "pause" ? client.pauseCron(name) : client.resumeCron(name));
        printSchedule(c, o.json === true, verb === "pause" ? "paused" : "resumed");
      });
    });
}

function removeCommand(): Command {
  return withDb(new Command("remove"))
    .description("delete a schedule (a worker still declaring it adds it back when it starts)")
    .argument("<name>", "schedule name", cronNameArg)
    .action(async (name: string, _o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        await client.removeCron(name);
        console.log(`cron ${name} removed`);
      });
    });
}

/** `svc cron ...`. */
export function cronCommand(): Command {
  return new Command("cron")
    .description("list cron schedules, add, trigger, pause, resume and remove them")
    .addCommand(listCommand())
    .addCommand(addCommand())
    .addCommand(triggerCommand())
    .addCommand(pauseResume("pause"))
    .addCommand(pauseResume("resume"))
    .addCommand(removeCommand());
}

/** `svc queue list|pause|resume`. */
import { Command } from "npm:commander@14.0.3";
import { queueToJson } from "../wire.ts";
import { printJson, printTable, queueArg, withClient, withDb } from "./common.ts";
import { queuesWithCoverage } from "../client/coverage.ts";

function ageText(seconds: number | null): string {
  if (seconds === null) return "-";
  if (seconds < 120) return `${Math.round(seconds)}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  return `${Math.round(seconds / 3600)}h`;
}

function listCommand(): Command {
  return withDb(new Command("list"))
    .description(
      "per queue: job counts by state, paused, age of the oldest available job, and whether a live runtime " +
        "will run its available jobs",
    )
    .option(
      "--json",
      "print JSON: {queues: [{name, paused, counts, oldest_available_age_seconds, live_runtimes, unhandled_kinds}]}",
    )
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const { queues, byName: cov } = await queuesWithCoverage(client);
        const live = (name: string) => cov.get(name)?.liveRuntimes ?? 0;
        const unhandled = (name: string) => cov.get(name)?.unhandledKinds ?? [];
        if (o.json) return printJson({ queues: queues.map((q) => queueToJson(q, cov.get(q.name))) });
        printTable(
          [
            "QUEUE",
            "PAUSED",
            "AVAILABLE",
            "SCHEDULED",
            "RUNNING",
            "WAITING",
            "RETRYABLE",
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "OLDEST",
            "RUNTIMES",
            "NOT RUN",
          ],
          queues.map((q) => [
            q.name,
            q.paused ? "yes" : "no",
            q.counts.available,
            q.counts.scheduled,
            q.counts.running,
            q.counts.waiting_external,
            q.counts.retryable,
            q.counts.completed,
            q.counts.failed,
            q.counts.cancelled,
            ageText(q.oldestAvailableAgeSeconds),
            live(q.name),
            q.counts.available === 0
              ? null
              : live(q.name) === 0
              ? "no live runtime serves this queue"
              : unhandled(q.name).length
              ? `no handler for ${unhandled(q.name).join(", ")}`
              : null,
          ]),
          "no queues yet (a queue appears with its first job or when paused)",
        );
      });
    });
}

function pauseResume(name: "pause" | "resume"): Command {
  return withDb(new Command(name))
    .description(
      name === "pause"
        ? "stop workers claiming jobs from a queue (running jobs go on; enqueue still works)"
        : "let workers claim jobs from a paused queue again",
    )
    .argument("<name>", "queue name", queueArg)
    .option(
      "--create",
      name === "pause"
        ? "pause a queue that has no jobs and no worker yet (without it, an unknown queue is refused)"
        : "accept a queue that has no jobs and no worker yet (without it, an unknown queue is refused)",
    )
    .action(async (queue: string, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const opts = { create: o.create === true };
        await (name === "pause" ? client.pauseQueue(queue, opts) : client.resumeQueue(queue, opts));
        console.log(`queue ${queue} ${name === "pause" ? "paused" : "resumed"}`);
      });
    });
}

/** `svc queue ...`. */
export function queueCommand(): Command {
  return new Command("queue")
    .description("list queues, pause and resume them")
    .addCommand(listCommand())
    .addCommand(pauseResume("pause"))
    .addCommand(pauseResume("resume"));
}

/** `svc queue list|pause|resume|limit`. */
import { Command, InvalidArgumentError } from "npm:commander@14.0.3";
import { queueLimitToJson, queueToJson } from "../wire.ts";
import { CliError, intArg, printJson, printTable, queueArg, timeText, withClient, withDb } from "./common.ts";
import { ValidationError } from "../errors.ts";
import type { QueueLimit, QueueLimitInfo } from "../types.ts";
import { MAX_LIMIT_WINDOW_MS } from "../storage/shared/limits.ts";
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
      "print JSON: {queues: [{name, paused, counts, oldest_available_age_seconds, live_runtimes, unhandled_kinds, " +
        "limit}]}",
    )
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const { queues, byName: cov, limits } = await queuesWithCoverage(client);
        if (o.json) {
          return printJson({
            queues: queues.map((q) => queueToJson(q, cov.get(q.name), limits.get(q.name))),
          });
        }
        const live = (name: string) => cov.get(name)?.liveRuntimes ?? 0;
        const unhandled = (name: string) => cov.get(name)?.unhandledKinds ?? [];
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
            "LIMIT",
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
            limitText(limits.get(q.name)),
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

/** `--rate 20/1s`: at most 20 claims in any window of one second; units ms, s, m, h (`20/s` is `20/1s`). */
export function parseRate(v: string): { rate: number; per: number } {
  const m = /^(\d+)\/(\d*)(ms|s|m|h)$/.exec(v.trim());
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
  const rate = m ? Number(m[1]) : NaN;
  const per = m ? Number(m[2] === "" ? 1 : m[2]) * unit[m[3] as keyof typeof unit] : NaN;
  if (
    !m || !Number.isSafeInteger(rate) || rate < 1 || rate > 2_147_483_647 || per < 1 ||
    per > MAX_LIMIT_WINDOW_MS
  ) {
    throw new InvalidArgumentError(
      "--rate must be COUNT/WINDOW such as 20/1s, 100/1m or 5/500ms (COUNT 1 or more, WINDOW 1 ms to 24 h)",
    );
  }
  return { rate, per };
}

function windowText(ms: number): string {
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1_000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A queue's limits in a table cell: `rate 20/1s (12 in window)`. */
function limitText(l: QueueLimitInfo | undefined): string | null {
  if (!l) return null;
  const parts: string[] = [];
  if (l.concurrency !== null) parts.push(`concurrency ${l.concurrency} (${l.inUse.concurrency ?? 0} in use)`);
  if (l.rate !== null && l.per !== null) {
    const counting = l.rateInForceAt && l.rateInForceAt.getTime() > Date.now() ? ", counting" : "";
    parts.push(`rate ${l.rate}/${windowText(l.per)} (${l.inUse.rate ?? 0} in window${counting})`);
  }
  if (l.perKey !== null) {
    parts.push(`per key ${l.perKey} (${Object.keys(l.inUse.perKey ?? {}).length} keys in use)`);
  }
  return parts.length ? parts.join(", ") : "none (kept)";
}

function limitCommand(): Command {
  return withDb(new Command("limit"))
    .description(
      "show or set a queue's fleet-wide limits, obeyed by every worker process at its next claim (stored in the " +
        "database; a worker's `limit` option only seeds a queue that has none). Setting replaces every limit of " +
        "the queue.",
    )
    .argument("<name>", "queue name", queueArg)
    .option(
      "--rate <count/window>",
      "at most COUNT jobs claimed in any WINDOW, e.g. 20/1s, 100/1m",
      parseRate,
    )
    .option(
      "--concurrency <n>",
      "at most N attempts open at once across every worker",
      intArg("--concurrency", 1, 2_147_483_647),
    )
    .option(
      "--per-key <n>",
      "at most N attempts open per job limit key (queue storage)",
      intArg("--per-key", 1, 2_147_483_647),
    )
    .option("--count-parked", "attempts parked for an HTTP callback hold a concurrency unit")
    .option("--clear", "remove every limit but keep the row (no worker's option seeds one again)")
    .option("--reset", "delete the queue's limits row (a worker's option may seed one again)")
    .option("--json", "print JSON: {limit} (null without a row), or {reset: true|false}")
    .action(async (queue: string, o, cmd: Command) => {
      const sets = o.rate !== undefined || o.concurrency !== undefined || o.perKey !== undefined ||
        o.countParked === true;
      if ([sets, o.clear === true, o.reset === true].filter(Boolean).length > 1) {
        cmd.error("error: give limits, --clear or --reset, not more than one of them", { exitCode: 2 });
      }
      await withClient(cmd, async (client) => {
        if (o.reset) {
          const found = await client.resetQueueLimit(queue);
          if (o.json) return printJson({ reset: found });
          console.log(found ? `queue ${queue}: limits row deleted` : `queue ${queue} had no limits row`);
          return;
        }
        let info: QueueLimitInfo | undefined;
        if (sets || o.clear) {
          const limit: QueueLimit = o.clear ? {} : {
            ...(o.rate ? { rate: o.rate.rate, per: o.rate.per } : {}),
            ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
            ...(o.perKey !== undefined ? { perKey: { concurrency: o.perKey } } : {}),
            ...(o.countParked ? { countParked: true } : {}),
          };
          try {
            info = await client.setQueueLimit(queue, limit, { setBy: "cli" });
          } catch (e) {
            // A limit the database refuses is a usage error, as a bad option value is.
            if (e instanceof ValidationError) throw new CliError(`error: ${e.message}`, 2);
            throw e;
          }
        } else {
          info = (await client.listQueueLimits()).find((l) => l.queue === queue);
        }
        if (o.json) return printJson({ limit: info ? queueLimitToJson(info) : null });
        if (!info) return console.log(`queue ${queue} has no limits`);
        console.log(`queue ${queue}: ${limitText(info)}`);
        if (info.rateInForceAt && info.rateInForceAt.getTime() > Date.now()) {
          console.log(
            `the rate counts claims from now and is enforced from ${
              timeText(info.rateInForceAt)
            } (one window later)`,
          );
        }
      });
    });
}

/** `svc queue ...`. */
export function queueCommand(): Command {
  return new Command("queue")
    .description("list queues, pause and resume them, set their limits")
    .addCommand(listCommand())
    .addCommand(pauseResume("pause"))
    .addCommand(pauseResume("resume"))
    .addCommand(limitCommand());
}

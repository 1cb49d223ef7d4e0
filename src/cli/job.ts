/** `svc job list|get|enqueue|retry|cancel|delete|retry-failed`. */
import { Command, InvalidArgumentError } from "npm:commander@14.0.3";
import { InvalidStateError, JobNotFoundError } from "../errors.ts";
import { callbackToJson, jobToJson } from "../wire.ts";
import { type Job, JOB_STATES, type JobState } from "../types.ts";
import { readInput } from "../platform/platform.ts";
import { utf8Text } from "../validation.ts";
import {
  CliError,
  cursorArg,
  intArg,
  jsonObjectArg,
  kindArg,
  parseJsonObject,
  printJson,
  printTable,
  queueArg,
  timeArg,
  timeText,
  UsageError,
  withClient,
  withDb,
} from "./common.ts";

function parseStates(v: string): JobState[] {
  const states = v.split(",").map((s) => s.trim());
  for (const s of states) {
    if (!JOB_STATES.includes(s as JobState)) {
      throw new InvalidArgumentError(
        `unknown state ${JSON.stringify(s)}; use one or more of ${JOB_STATES.join(", ")}`,
      );
    }
  }
  return states as JobState[];
}

const parseId = intArg("job id", 1, Number.MAX_SAFE_INTEGER);

/** Prints one job: JSON, or `key: value` lines, each attempt's error on its own lines with its stack indented. */
function printJob(job: Job, json: boolean): void {
  if (json) return printJson(jobToJson(job));
  const j = jobToJson(job);
  for (const [k, v] of Object.entries(j)) {
    if (k === "errors") continue;
    console.log(`${k}: ${v === null ? "-" : typeof v === "object" ? JSON.stringify(v) : v}`);
  }
  console.log(`errors: ${job.errors.length ? "" : "-"}`);
  for (const e of job.errors) {
    console.log(`  attempt ${e.attempt} at ${e.at}${e.terminal ? " (terminal)" : ""}: ${e.error}`);
    if (e.stack) console.log(e.stack.split("\n").map((l) => `    ${l}`).join("\n"));
  }
}

/** The error a job's latest attempt ended with: only for a failed or retryable job (others ended otherwise). */
function lastError(j: Job): string | null {
  if ((j.state !== "failed" && j.state !== "retryable") || j.errors.length === 0) return null;
  return j.errors[j.errors.length - 1].error.split("\n")[0].slice(0, 60);
}

function listCommand(): Command {
  return withDb(new Command("list"))
    .description("list jobs, newest first")
    .option("--state <states>", `only these states, comma-separated (${JOB_STATES.join(", ")})`, parseStates)
    .option("--kind <kind>", "only this job kind")
    .option("--queue <queue>", "only this queue", queueArg)
    .option("--limit <n>", "at most this many jobs (1 to 1000)", intArg("--limit", 1, 1000), 50)
    .option("--cursor <cursor>", "the next page: the next_cursor of the previous page", cursorArg)
    .option("--json", "print JSON: {jobs, next_cursor}")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const page = await client.listJobs({
          state: o.state,
          kind: o.kind,
          queue: o.queue,
          limit: o.limit,
          cursor: o.cursor,
        });
        if (o.json) return printJson({ jobs: page.jobs.map(jobToJson), next_cursor: page.nextCursor });
        printTable(
          ["ID", "KIND", "QUEUE", "STATE", "ATTEMPT", "RUN AT", "LAST ERROR"],
          page.jobs.map((j) => [
            j.id,
            j.kind,
            j.queue,
            j.state,
            `${j.attempt}/${j.effectiveMaxAttempts ?? j.maxAttempts}`, // the limit that applied (D-9)
            timeText(j.runAt),
            lastError(j),
          ]),
          "no jobs match",
        );
        if (page.nextCursor) console.log(`more: svc job list --cursor ${page.nextCursor} (same filters)`);
      });
    });
}

function getCommand(): Command {
  return withDb(new Command("get"))
    .description("show one job with its errors and result")
    .argument("<id>", "job id", parseId)
    .option("--json", "print JSON")
    .action(async (id: number, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const job = await client.getJob(id);
        if (!job) throw new JobNotFoundError(id);
        const callbacks = await client.listCallbacks(id);
        if (o.json) return printJson({ ...jobToJson(job), callbacks: callbacks.map(callbackToJson) });
        printJob(job, false);
        if (callbacks.length) console.log("callbacks:");
        for (const c of callbacks) {
          const refused = c.rejectedCount > 0
            ? `; ${c.rejectedCount} request(s) refused, last ${c.lastRejection?.status} ${c.lastRejection?.code} at ${c.lastRejection?.at}`
            : "";
          console.log(
            `  ${c.id} ${c.state} attempt ${c.attempt} (${c.kind}), deadline ${c.deadlineAt.toISOString()}${refused}`,
          );
        }
      });
    });
}

function enqueueCommand(): Command {
  return withDb(new Command("enqueue"))
    .description("enqueue a job")
    .argument("<kind>", "job kind (the handler's name)", kindArg)
    .option(
      "--args <json>",
      "the job's args, a JSON object (- reads it from standard input)",
      (v: string) => v === "-" ? STDIN : jsonObjectArg("--args")(v),
    )
    .option("--args-file <path>", "read the args (a JSON object) from this file; - is standard input")
    .option("--queue <queue>", "queue", queueArg, "default")
    .option("--priority <n>", "1 (highest) to 4", intArg("--priority", 1, 4), 2)
    .option(
      "--run-at <time>",
      "run at this RFC 3339 time instead of now, e.g. 2026-12-01T09:00:00Z",
      timeArg("--run-at"),
    )
    .option(
      "--max-attempts <n>",
      "attempts before the job fails for good (1 to 1000)",
      intArg("--max-attempts", 1, 1000),
      25,
    )
    .option("--json", "print the job as JSON")
    .addHelpText(
      "after",
      `\nExamples:\n  svc job enqueue send_email --args '{"to":"a@example.com"}' --queue mail --priority 1\n` +
        `  svc job enqueue import --args-file big.json\n  produce-args | svc job enqueue import --args -`,
    )
    .action(async (kind: string, o, cmd: Command) => {
      const args = await enqueueArgs(o.args, o.argsFile);
      await withClient(cmd, async (client) => {
        const job = await client.enqueue(kind, args, {
          queue: o.queue,
          priority: o.priority,
          runAt: o.runAt,
          maxAttempts: o.maxAttempts,
        });
        if (o.json) return printJson(jobToJson(job));
        console.log(
          `enqueued job ${job.id} (${job.kind} on queue ${job.queue}, ${job.state}, run at ${
            timeText(job.runAt)
          })`,
        );
      });
    });
}

/** Marks `--args -`: the args come from standard input. */
const STDIN = Symbol("stdin");

/** The args of `svc job enqueue`: inline, from a file, or from standard input (`-`); `{}` when none. */
async function enqueueArgs(
  inline: Record<string, unknown> | typeof STDIN | undefined,
  file: string | undefined,
): Promise<Record<string, unknown>> {
  if (inline !== undefined && file !== undefined) {
    throw new UsageError("--args and --args-file cannot be used together: pass the args one way");
  }
  if (inline !== STDIN && file === undefined) return inline ?? {};
  const path = file ?? "-";
  const name = path === "-" ? "the args on standard input" : `--args-file ${path}`;
  let bytes: Uint8Array;
  try {
    bytes = await readInput(path);
  } catch (e) {
    throw new CliError(`cannot read ${name}: ${(e as Error).message}`);
  }
  const text = utf8Text(bytes);
  if (text === null) throw new UsageError(`${name} is not UTF-8 text`);
  try {
    return parseJsonObject(name, text);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function retryCommand(): Command {
  return withDb(new Command("retry"))
    .description("run a completed, failed or cancelled job again (attempts reset, errors kept)")
    .argument("<id>", "job id", parseId)
    .option("--json", "print the job as JSON")
    .action(async (id: number, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const job = await client.retry(id).catch((e) => {
          if (e instanceof InvalidStateError) {
            throw new CliError(
              `${e.message}; wait for it to finish, or cancel it first with \`svc job cancel ${id}\``,
            );
          }
          throw e;
        });
        if (o.json) return printJson(jobToJson(job));
        console.log(`job ${job.id} is ${job.state} again (queue ${job.queue})`);
      });
    });
}

function cancelCommand(): Command {
  return withDb(new Command("cancel"))
    .description("cancel a job that has not finished (a running handler is told through its abort signal)")
    .argument("<id>", "job id", parseId)
    .option("--json", "print the job as JSON")
    .action(async (id: number, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const job = await client.cancel(id).catch((e) => {
          if (e instanceof InvalidStateError) {
            throw new CliError(
              `${e.message}; it has already finished (run it again with \`svc job retry ${id}\`)`,
            );
          }
          throw e;
        });
        if (o.json) return printJson(jobToJson(job));
        console.log(`job ${job.id} cancelled`);
      });
    });
}

function deleteCommand(): Command {
  return withDb(new Command("delete"))
    .description("delete a completed, failed or cancelled job and its callbacks")
    .argument("<id>", "job id", parseId)
    .option("--json", "print the deleted job as JSON")
    .action(async (id: number, o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const job = await client.deleteJob(id).catch((e) => {
          if (e instanceof InvalidStateError) {
            throw new CliError(
              `${
                e.message.replace(/ \(cancel it first\)$/, "")
              }; cancel it first with \`svc job cancel ${id}\``,
            );
          }
          throw e;
        });
        if (o.json) return printJson(jobToJson(job));
        console.log(`deleted job ${job.id} (${job.kind} on queue ${job.queue}, ${job.state})`);
      });
    });
}

function retryFailedCommand(): Command {
  return withDb(new Command("retry-failed"))
    .description("run every failed job again (optionally of one kind or queue)")
    .option("--kind <kind>", "only this job kind")
    .option("--queue <queue>", "only this queue", queueArg)
    .option("--json", "print JSON: {count}")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const count = await client.bulkRetry({ state: "failed", kind: o.kind, queue: o.queue });
        if (o.json) return printJson({ count });
        console.log(`retried ${count} failed job${count === 1 ? "" : "s"}`);
      });
    });
}

/** `svc job ...`. */
export function jobCommand(): Command {
  return new Command("job")
    .description("list, inspect, enqueue, retry, cancel and delete jobs")
    .addCommand(listCommand())
    .addCommand(getCommand())
    .addCommand(enqueueCommand())
    .addCommand(retryCommand())
    .addCommand(cancelCommand())
    .addCommand(deleteCommand())
    .addCommand(retryFailedCommand());
}

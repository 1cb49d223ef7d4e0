/**
 * `svc storage status|prepare|enter-mixed-transition|finalize|abort`: the staged move of a cluster from the
 * canonical engine to queue storage (docs/guide/upgrade.md). Exit 0 done (or nothing to do), 1 failure,
 * 2 usage error, 3 blocked (the one-line error names the blocker).
 */
import { Command } from "npm:commander@14.0.3";
import type { Client } from "../client/client.ts";
import type { StorageCommand, StorageStatus } from "../storage/shared/transition.ts";
import { CliError, intArg, printJson, withClient, withDb } from "./common.ts";
import { sleep } from "../timing.ts";

/** A blocked step: exit 3. */
class BlockedError extends CliError {
  constructor(message: string) {
    super(message, 3);
  }
}

/** The report as `svc storage status` prints it. */
export function statusText(s: StorageStatus): string {
  return [
    `state: ${s.state}`,
    `engine (new writes): ${s.engine}`,
    `canonical backlog: ${s.canonical_backlog} unfinished job${s.canonical_backlog === 1 ? "" : "s"}`,
    `queue storage: ${s.queue_storage_ready ? "ready" : "objects missing (run svc migrate)"}` +
    (s.queue_storage_schema ? ` (schema ${s.queue_storage_schema})` : ""),
    `live runtimes: ${s.runtimes.queue_storage_capable} can execute queue storage, ` +
    `${s.runtimes.canonical_only} only canonical`,
    `blockers:${s.blockers.length ? "" : " none"}`,
    ...s.blockers.map((b) => `  - ${b}`),
    `abort possible: ${s.abort_possible ? "yes" : "no"}`,
    `next step: ${s.next_step ?? "none (the transition is finished)"}`,
  ].join("\n");
}

function statusCommand(): Command {
  return withDb(new Command("status"))
    .description("the storage transition: state, canonical backlog, runtimes by engine, blockers, next step")
    .option("--json", "print JSON")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, async (client) => {
        const s = await client.storageStatus();
        if (o.json) return printJson(s);
        console.log(statusText(s));
      });
    });
}

async function step(client: Client, command: StorageCommand): Promise<void> {
  const r = await client.storageStep(command);
  if (r.outcome === "blocked") throw new BlockedError(`${command} is blocked: ${r.message}`);
  console.log(r.outcome === "noop" ? `nothing to do: ${r.message}` : `storage transition: ${r.message}`);
}

function simpleStep(command: "prepare" | "enter-mixed-transition" | "abort", description: string): Command {
  return withDb(new Command(command))
    .description(description)
    .addHelpText("after", "\nExit codes: 0 done or nothing to do, 1 failure, 2 usage error, 3 blocked.")
    .action(async (_o, cmd: Command) => {
      await withClient(cmd, (client) => step(client, command), { limited: false });
    });
}

/**
 * Finalize: the canonical backlog must read 0 twice, at least a second apart, the second time under the
 * state row's lock (the step itself checks again there).
 */
async function finalize(
  client: Client,
  o: { check?: boolean; wait?: boolean; timeout?: number },
): Promise<void> {
  const until = o.timeout === undefined ? Infinity : Date.now() + o.timeout * 1000;
  let last: { at: number; backlog: number } | null = null;
  for (;;) {
    const s = await client.storageStatus();
    if (s.state === "active") {
      console.log("nothing to do: already active");
      return;
    }
    if (s.state !== "mixed_transition") {
      throw new BlockedError(
        `finalize is blocked: the cluster is ${s.state}; ${s.next_step ?? ""} first`.trim(),
      );
    }
    if (s.blockers.length === 0) {
      if (o.check) {
        console.log(
          "finalize is possible: the canonical backlog is empty and no canonical-only runtime is live",
        );
        return;
      }
      await sleep(1000);
      const r = await client.storageStep("finalize");
      if (r.outcome !== "blocked") {
        console.log(
          r.outcome === "noop" ? `nothing to do: ${r.message}` : `storage transition: ${r.message}`,
        );
        return;
      }
      if (!o.wait) throw new BlockedError(`finalize is blocked: ${r.message}`);
    } else if (!o.wait || o.check) {
      throw new BlockedError(`finalize is blocked: ${s.blockers[0]}`);
    }
    if (Date.now() >= until) {
      throw new BlockedError(
        `finalize --wait timed out: ${s.blockers[0] ?? "the last check under the lock failed"}`,
      );
    }
    const now = Date.now();
    let progress = `finalize: waiting: ${s.canonical_backlog} canonical job(s) left`;
    if (last && last.backlog > s.canonical_backlog) {
      const rate = (last.backlog - s.canonical_backlog) / ((now - last.at) / 1000);
      progress += `, ${rate.toFixed(1)}/s, about ${Math.ceil(s.canonical_backlog / rate)} s to go`;
    }
    if (s.blockers.some((b) => !b.startsWith("canonical backlog"))) {
      progress += `; ${s.blockers.filter((b) => !b.startsWith("canonical backlog")).join("; ")}`;
    }
    console.log(progress);
    last = { at: now, backlog: s.canonical_backlog };
    await sleep(Math.min(2000, Math.max(0, until - Date.now())));
  }
}

function finalizeCommand(): Command {
  return withDb(new Command("finalize"))
    .description("finish the transition (mixed_transition -> active) once the canonical backlog is empty")
    .option("--check", "only report whether finalize is possible (exit 0) or blocked (exit 3)")
    .option("--wait", "wait, showing progress, until finalize is possible, then finalize")
    .option(
      "--timeout <seconds>",
      "with --wait: give up after this long (exit 3)",
      intArg("--timeout", 1, 31_536_000),
    )
    .addHelpText("after", "\nExit codes: 0 done or nothing to do, 1 failure, 2 usage error, 3 blocked.")
    .action(async (o, cmd: Command) => {
      await withClient(cmd, (client) => finalize(client, o), { limited: false });
    });
}

/** `svc storage ...`. */
export function storageCommand(): Command {
  return new Command("storage")
    .description("storage engine and the staged transition from canonical to queue storage")
    .addCommand(statusCommand())
    .addCommand(
      simpleStep(
        "prepare",
        "prepare the move to queue storage (canonical -> prepared); old and new workers keep running canonical",
      ),
    )
    .addCommand(
      simpleStep(
        "enter-mixed-transition",
        "send new work to queue storage while the canonical backlog drains (prepared -> mixed_transition)",
      ),
    )
    .addCommand(finalizeCommand())
    .addCommand(
      simpleStep(
        "abort",
        "go back to canonical (from prepared, or from mixed_transition while queue storage holds no job)",
      ),
    );
}

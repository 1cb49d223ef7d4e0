/** What the UI derives from a job's own fields: its durations and the attempt limit that applied. */
import type { Job } from "./api.ts";
import { msBetween } from "./format.ts";

/** The later of enqueue and run_at: when the job could first have started. */
function readyAt(j: Job): string {
  return Date.parse(j.run_at) > Date.parse(j.created_at) ? j.run_at : j.created_at;
}

/** An attempt that has not ended: its start is written with its outcome, so only its claim is known. */
function open(j: Job): boolean {
  return j.state === "running" || j.state === "waiting_external";
}

/**
 * Wait time of the latest attempt: from when it could start (enqueue or run_at, whichever is later) to
 * its start (to its claim while it runs, the start being written with the outcome); still growing for an
 * available job. Null for jobs that will not start.
 */
export function waitMs(j: Job, now = Date.now()): number | null {
  if (open(j)) return j.claimed_at ? msBetween(readyAt(j), j.claimed_at, now) : null;
  if (j.attempted_at) return msBetween(readyAt(j), j.attempted_at, now);
  if (j.state === "available") return msBetween(readyAt(j), null, now);
  return null;
}

/** Run time of the latest attempt: start to finish, or from its claim to now while it runs. */
export function runMs(j: Job, now = Date.now()): number | null {
  if (open(j)) {
    const from = j.attempted_at ?? j.claimed_at;
    return from ? msBetween(from, null, now) : null;
  }
  if (!j.attempted_at) return null;
  if (j.finalized_at) return msBetween(j.attempted_at, j.finalized_at, now);
  return null;
}

/** The attempt limit that applied (D-9: stored at claim) and whether it is the kind's, lower than the job's. */
export function attemptLimit(j: Job): { limit: number; byKind: boolean; stored: boolean } {
  const eff = j.effective_max_attempts ?? null;
  if (eff === null) return { limit: j.max_attempts, byKind: false, stored: false };
  return { limit: eff, byKind: eff < j.max_attempts, stored: true };
}

/** A finished or running job whose earlier attempts failed: its errors are history, not its outcome. */
export function errorsAreHistory(j: Job): boolean {
  return j.errors.length > 0 && j.state !== "failed" && j.state !== "retryable";
}

/** One attempt of a job as the timeline shows it: what storage keeps of it. */
export interface AttemptRow {
  attempt: number;
  /** failed and retried, failed for good, completed, cancelled, running, waiting for its callback, ... */
  outcome: string;
  /** Claim of the attempt: known for the latest attempt only. */
  claimedAt: string | null;
  /** Start of the attempt: known for the latest attempt once it ended (earlier starts are not kept). */
  startedAt: string | null;
  endedAt: string | null;
  /** Run time: known for the latest attempt only. */
  ranMs: number | null;
  /** The runtime that ran it: known for the latest attempt only. */
  by: string | null;
  error: { error: string; stack?: string } | null;
}

const LATEST_OUTCOME: Record<string, string> = {
  completed: "completed",
  failed: "failed for good",
  cancelled: "cancelled",
  running: "running",
  waiting_external: "waiting for its callback",
  retryable: "failed, retry scheduled",
};

/**
 * The attempts of a job, newest first: one row per failed attempt (its error, when it ended) and the
 * latest attempt with its start, run time, runtime and outcome. Attempts of an earlier life of a job
 * retried by hand keep their errors; their numbers restart at 1.
 */
export function attemptTimeline(j: Job, now = Date.now()): AttemptRow[] {
  const rows: AttemptRow[] = j.errors.map((e) => ({
    attempt: e.attempt,
    outcome: e.terminal ? "failed for good" : "failed, retried",
    claimedAt: null,
    startedAt: null,
    endedAt: e.at,
    ranMs: null,
    by: null,
    error: { error: e.error, stack: e.stack },
  }));
  const last = rows.length ? rows[rows.length - 1] : null;
  // The latest attempt ended with the last error when the job waits for a retry, failed, or was cancelled
  // after that failure; otherwise (running, waiting, completed, cancelled while running) it has a row of its own.
  const endedInLastError = last !== null && last.attempt === j.attempt;
  const ownRow = j.attempt > 0 &&
    ["running", "waiting_external", "completed", "cancelled"].includes(j.state) &&
    !endedInLastError;
  const latest: AttemptRow | null = ownRow
    ? {
      attempt: j.attempt,
      outcome: LATEST_OUTCOME[j.state] ?? j.state.replace(/_/g, " "),
      claimedAt: null,
      startedAt: null,
      endedAt: j.finalized_at,
      ranMs: null,
      by: null,
      error: null,
    }
    : endedInLastError && j.attempted_at
    ? last
    : null;
  if (latest) {
    latest.claimedAt = j.claimed_at;
    latest.startedAt = j.attempted_at;
    latest.by = j.attempted_by;
    latest.ranMs = runMs(j, now) ??
      (latest.startedAt && latest.endedAt ? msBetween(latest.startedAt, latest.endedAt, now) : null);
    if (ownRow) rows.push(latest);
  }
  return rows.reverse();
}

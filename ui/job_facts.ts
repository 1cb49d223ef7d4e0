/** What the UI derives from a job's own fields: its durations and the attempt limit that applied. */
import type { Job } from "./api.ts";
import { msBetween } from "./format.ts";

/** The later of enqueue and run_at: when the job could first have started. */
function readyAt(j: Job): string {
  return Date.parse(j.run_at) > Date.parse(j.created_at) ? j.run_at : j.created_at;
}

/**
 * Wait time of the latest attempt: from when it could start (enqueue or run_at, whichever is later) to
 * its start; still growing for a job that has not started. Null for jobs that will not start.
 */
export function waitMs(j: Job, now = Date.now()): number | null {
  if (j.attempted_at) {
    const ms = msBetween(readyAt(j), j.attempted_at, now);
    return ms;
  }
  if (j.state === "available" || (j.state === "running" && !j.attempted_at)) {
    return msBetween(readyAt(j), null, now);
  }
  return null;
}

/** Run time of the latest attempt: start to finish, or to now while it runs. */
export function runMs(j: Job, now = Date.now()): number | null {
  if (!j.attempted_at) return null;
  if (j.state === "running" || j.state === "waiting_external") return msBetween(j.attempted_at, null, now);
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

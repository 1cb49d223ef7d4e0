/**
 * Outcome writes (completions, failures, snoozes, parks) are retried through a database outage for a
 * budget of about `rescueAfter - heartbeatInterval`: long enough to ride out a restart, short enough
 * that the write lands before the leader would rescue the attempt anyway. An error that retrying cannot
 * fix is not retried: a data error (SQLSTATE classes 22 and 54, e.g. a value PostgreSQL cannot store),
 * a statement error (42) or an error the SQL API raises on purpose (P0). Only a data error is a reason
 * to split a batch (docs/reference/configuration.md, "Outcome writes").
 */
import type { Logger } from "../types.ts";
import { sleep } from "../timing.ts";

/** The SQLSTATE of a database error, if any. */
function sqlState(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "";
}

/** A data error: this statement with these values can never succeed (splitting its batch may help). */
export function isDataError(e: unknown): boolean {
  const c = sqlState(e);
  return c.startsWith("22") || c.startsWith("54");
}

/** Whether retrying the same write later may succeed (a connection error, a restart, a lock timeout). */
export function isRetryable(e: unknown): boolean {
  const c = sqlState(e);
  return !(isDataError(e) || c.startsWith("42") || c.startsWith("P0"));
}

/** The retry budget of outcome writes for a worker's timings, in ms (at least 1 s). */
export function outcomeRetryBudget(rescueAfterMs: number, heartbeatIntervalMs: number): number {
  return Math.max(1_000, rescueAfterMs - heartbeatIntervalMs);
}

/**
 * Runs `write`, and again after a growing pause (0.1 s doubling to 2 s) while it fails with a
 * retryable error and `budgetMs` has not run out; then throws the last error.
 */
export async function retryWithin<T>(
  write: () => Promise<T>,
  budgetMs: number,
  logger: Logger,
  what: string,
): Promise<T> {
  const until = Date.now() + budgetMs;
  for (let attempt = 0;; attempt++) {
    try {
      return await write();
    } catch (e) {
      const pause = Math.min(100 * 2 ** attempt, 2_000);
      if (!isRetryable(e) || Date.now() + pause > until) throw e;
      if (attempt === 0) {
        logger.warn(
          `svc: ${what} failed (${(e as Error)?.message ?? e}); retrying for up to ${
            Math.round(budgetMs / 1000)
          } s`,
        );
      }
      await sleep(pause);
    }
  }
}

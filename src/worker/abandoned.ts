/**
 * Attempts this worker gave up on: their outcome (or give-back) could not be written within the retry
 * budget, so as far as the database knows they are still running here. The runtime's heartbeat names
 * them (`health.abandoned` of its runtimes row) and the leader's rescue ends them through the engine's
 * lease-fenced `fail` (retried by the policy stored at claim, or failed when it was the last attempt):
 * an attempt the worker lost track of never stays `running` while its runtime is alive. An attempt
 * leaves the list once the database shows it ended (or it is no longer that attempt).
 */
import type { AttemptRef, StorageEngine } from "../storage/engine.ts";
import { storableText } from "../validation.ts";

/** At most this many are named in one heartbeat (the oldest first); the rest wait for the next. */
export const MAX_REPORTED = 200;

/** An attempt given up on, as the heartbeat names it. */
export interface AbandonedAttempt extends AttemptRef {
  /** Why the worker gave up (the last error of the write). */
  reason: string;
}

export class AbandonedAttempts {
  private readonly items = new Map<string, AbandonedAttempt>();

  /** Records that the worker gave up on an attempt. */
  add(a: AttemptRef, reason: string): void {
    this.items.set(`${a.id}:${a.lease}`, { id: a.id, lease: a.lease, reason: storableText(reason, 500) });
  }

  get size(): number {
    return this.items.size;
  }

  /** What the next heartbeat names. */
  list(): AbandonedAttempt[] {
    return [...this.items.values()].slice(0, MAX_REPORTED);
  }

  /**
   * Forgets the attempts the database shows ended (rescued, cancelled, or written after all): the job is
   * gone, at another lease, or no longer running. Reads one job per attempt listed; errors keep it listed.
   */
  async prune(engine: StorageEngine): Promise<void> {
    for (const [key, a] of [...this.items].slice(0, MAX_REPORTED)) {
      try {
        const job = await engine.getJob(a.id);
        if (!job || job.lease !== a.lease || job.state !== "running") this.items.delete(key);
      } catch {
        return; // the database is away: keep naming them
      }
    }
  }
}

/**
 * Batches completions. A finished attempt frees its slot at once and its completion waits here: the
 * completer writes what has queued within a macrotask in one statement, and while that statement is
 * in flight the next batch queues up. Claims and completions thus run concurrently on two
 * connections instead of taking turns (ADR 008).
 */
import type { Completion, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { sleep } from "./wakeup.ts";
import { Batcher } from "../runtime/batcher.ts";

/**
 * How long a completion waits for others to share its statement. Without it, at `maxWorkers: 10` every
 * claim of 10 was followed by a completion statement of about 10; waiting 1 ms halves the completion
 * statements and the database CPU they take from the claims (drain at concurrency 10: +20 % here).
 */
export const COMPLETION_LINGER_MS = 1;

export class Completer {
  private readonly batcher: Batcher<Completion, boolean>;

  constructor(
    private readonly engine: StorageEngine,
    /** Delete completed rows instead of keeping them (`retention.completed === 0`). */
    readonly deleteRows: boolean,
    private readonly logger: Logger,
    maxBatch = 1000,
    /** A batch waits this long for more completions (group commit), unless it is full. */
    lingerMs = COMPLETION_LINGER_MS,
  ) {
    this.batcher = new Batcher(
      async (items) => {
        const done = new Set(await this.write(items));
        return items.map((c) => done.has(c.id));
      },
      maxBatch,
      lingerMs,
    );
  }

  /** Queues a completion; resolves true when it was written (false when the attempt was no longer current). */
  add(item: Completion): Promise<boolean> {
    return this.batcher.add(item);
  }

  /** Waits until everything queued is written. */
  drain(): Promise<void> {
    return this.batcher.drain();
  }

  private async write(items: Completion[]): Promise<number[]> {
    for (let attempt = 1;; attempt++) {
      try {
        return await this.engine.complete(items, !this.deleteRows);
      } catch (e) {
        if (attempt >= 5) {
          // The jobs stay `running`; the leader rescues them once their heartbeat is stale (at-least-once).
          this.logger.error(`svc: could not record ${items.length} completions: ${(e as Error).message}`);
          return [];
        }
        await sleep(100 * 2 ** attempt);
      }
    }
  }
}

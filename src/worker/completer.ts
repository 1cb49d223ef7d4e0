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

export class Completer {
  private readonly batcher: Batcher<Completion, boolean>;

  constructor(
    private readonly engine: StorageEngine,
    /** Delete completed rows instead of keeping them (`retention.completed === 0`). */
    readonly deleteRows: boolean,
    private readonly logger: Logger,
    maxBatch = 1000,
  ) {
    this.batcher = new Batcher(async (items) => {
      const done = new Set(await this.write(items));
      return items.map((c) => done.has(c.id));
    }, maxBatch);
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
        return await this.engine.complete(items, this.deleteRows);
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

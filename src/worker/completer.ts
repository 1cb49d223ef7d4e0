/**
 * Batches completions: while one UPDATE is in flight, finished attempts queue up and go in the next
 * one. No added latency when idle; one round trip per batch under load.
 */
import type { Completion, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { sleep } from "./wakeup.ts";

interface Pending {
  item: Completion;
  resolve: (completed: boolean) => void;
}

export class Completer {
  private buf: Pending[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly engine: StorageEngine,
    private readonly deleteRows: boolean,
    private readonly logger: Logger,
    private readonly maxBatch = 1000,
  ) {}

  /** Queues a completion; resolves true when it was written (false when the attempt was no longer current). */
  add(item: Completion): Promise<boolean> {
    return new Promise((resolve) => {
      this.buf.push({ item, resolve });
      if (!this.flushing) this.flushing = this.flush();
    });
  }

  /** Waits until everything queued is written. */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.buf.length > 0) {
        const batch = this.buf.splice(0, this.maxBatch);
        const done = await this.write(batch.map((p) => p.item));
        batch.forEach((p) => p.resolve(done.has(p.item.id)));
      }
    } finally {
      this.flushing = null;
    }
  }

  private async write(items: Completion[]): Promise<Set<number>> {
    for (let attempt = 1;; attempt++) {
      try {
        return new Set(await this.engine.complete(items, this.deleteRows));
      } catch (e) {
        if (attempt >= 5) {
          // The jobs stay `running`; the leader rescues them once their heartbeat is stale (at-least-once).
          this.logger.error(`svc: could not record ${items.length} completions: ${(e as Error).message}`);
          return new Set();
        }
        await sleep(100 * 2 ** attempt);
      }
    }
  }
}

/**
 * Batches completions. A finished attempt frees its slot at once and its completion waits here: the
 * completer writes what has queued within a macrotask in one statement, and while that statement is
 * in flight the next batch queues up. Claims and completions thus run concurrently on two
 * connections instead of taking turns (ADR 008).
 */
import type { Completion, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { sleep } from "./wakeup.ts";
import { nextMacrotask } from "../runtime/runtime.ts";

/** A completion waiting to be written. */
interface PendingCompletion {
  item: Completion;
  resolve: (completed: boolean) => void;
}

export class Completer {
  private buf: PendingCompletion[] = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;

  constructor(
    private readonly engine: StorageEngine,
    /** Delete completed rows instead of keeping them (`retention.completed === 0`). */
    readonly deleteRows: boolean,
    private readonly logger: Logger,
    private readonly maxBatch = 1000,
  ) {}

  /** Queues a completion; resolves true when it was written (false when the attempt was no longer current). */
  add(item: Completion): Promise<boolean> {
    return new Promise((resolve) => {
      this.buf.push({ item, resolve });
      this.schedule();
    });
  }

  /** Waits until everything queued is written. */
  async drain(): Promise<void> {
    for (;;) {
      if (this.flushing) await this.flushing;
      else if (this.buf.length > 0) this.flushing = this.flush();
      else return;
    }
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    nextMacrotask().then(() => {
      this.scheduled = false;
      if (!this.flushing && this.buf.length > 0) this.flushing = this.flush();
    });
  }

  private settle(batch: PendingCompletion[], completedIds: number[]): void {
    const done = new Set(completedIds);
    batch.forEach((p) => p.resolve(done.has(p.item.id)));
  }

  private async flush(): Promise<void> {
    try {
      while (this.buf.length > 0) {
        const batch = this.buf.splice(0, this.maxBatch);
        this.settle(batch, await this.write(batch.map((p) => p.item)));
      }
    } finally {
      this.flushing = null;
    }
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

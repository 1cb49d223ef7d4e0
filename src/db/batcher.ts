/**
 * Group commit for one kind of statement: the items added within one macrotask go to the database in
 * one call, and while that call is in flight the next items queue up for the call after it. Under load
 * this turns N round trips and N commits into a few; when idle an item waits one macrotask.
 */
import { nextMacrotask } from "../platform/platform.ts";
import { sleep } from "../timing.ts";

interface Pending<I, O> {
  item: I;
  resolve: (out: O) => void;
  reject: (e: unknown) => void;
}

/** Returned by `write` in an item's place when that item alone failed: its caller gets `error`. */
export class ItemFailure {
  constructor(readonly error: unknown) {}
}

export class Batcher<I, O> {
  private queue: Pending<I, O>[] = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;

  /**
   * @param write writes a batch and returns one output per item, in the items' order (an `ItemFailure`
   *   rejects that item alone); when it throws, every item of that batch rejects with its error.
   * @param maxBatch the most items one call takes.
   * @param lingerMs how long a batch that is not full waits for more items before it is written (0:
   *   one macrotask). Fewer, larger statements cost the database less CPU, for that much latency.
   */
  constructor(
    private readonly write: (items: I[]) => Promise<(O | ItemFailure)[]>,
    private readonly maxBatch = 500,
    private readonly lingerMs = 0,
  ) {}

  /** Queues an item; resolves with its output once its batch is written. */
  add(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Items queued and not yet taken into a batch (a batch being written no longer counts). */
  get pending(): number {
    return this.queue.length;
  }

  /** Waits until everything queued so far is written (or failed). */
  async drain(): Promise<void> {
    for (;;) {
      if (this.flushing) await this.flushing;
      else if (this.queue.length > 0) this.flushing = this.flush();
      else return;
    }
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    nextMacrotask().then(() => {
      this.scheduled = false;
      if (!this.flushing && this.queue.length > 0) this.flushing = this.flush();
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        if (this.lingerMs > 0 && this.queue.length < this.maxBatch) await sleep(this.lingerMs);
        const batch = this.queue.splice(0, this.maxBatch);
        let out: (O | ItemFailure)[];
        try {
          out = await this.write(batch.map((p) => p.item));
        } catch (e) {
          batch.forEach((p) => p.reject(e));
          continue;
        }
        batch.forEach((p, i) => {
          const o = out[i];
          if (o instanceof ItemFailure) p.reject(o.error);
          else p.resolve(o);
        });
      }
    } finally {
      this.flushing = null;
    }
  }
}

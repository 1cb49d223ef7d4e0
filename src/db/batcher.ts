/**
 * Group commit for one kind of statement: the items added within one macrotask go to the database in
 * one call, and while that call is in flight the next items queue up for the call after it. Under load
 * this turns N round trips and N commits into a few; when idle an item waits one macrotask.
 */
import { nextMacrotask } from "../platform/platform.ts";
import { sleep } from "../timing.ts";

/** Told of an item's output, in place of a promise per item (`addTo`). */
export interface BatchSink<O> {
  /** The item's batch was written: its output. */
  batchWritten(out: O): void;
  /** The item failed (its batch's error, or its own). */
  batchFailed(e: unknown): void;
}

interface Pending<I, O> {
  item: I;
  sink: BatchSink<O>;
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
    return new Promise((resolve, reject) => this.addTo(item, { batchWritten: resolve, batchFailed: reject }));
  }

  /** Queues an item; `sink` is told of its output once its batch is written (no promise per item). */
  addTo(item: I, sink: BatchSink<O>): void {
    this.queue.push({ item, sink });
    this.schedule();
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
          batch.forEach((p) => tell(p.sink, false, e));
          continue;
        }
        batch.forEach((p, i) => {
          const o = out[i];
          if (o instanceof ItemFailure) tell(p.sink, false, o.error);
          else tell(p.sink, true, o);
        });
      }
    } finally {
      this.flushing = null;
    }
  }
}

/**
 * Tells a sink of its item's output. A sink that throws harms neither the batch's other items nor the loop:
 * its error surfaces as an unhandled rejection, as it did when each item had a promise.
 */
function tell<O>(sink: BatchSink<O>, ok: boolean, v: unknown): void {
  try {
    if (ok) sink.batchWritten(v as O);
    else sink.batchFailed(v);
  } catch (e) {
    void Promise.reject(e);
  }
}

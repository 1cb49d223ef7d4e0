/**
 * Batches completions, and (apart) the start records of prefetched attempts. A finished attempt frees its
 * slot at once and its completion waits here: the completer writes what has queued within a macrotask in
 * one statement, and while that statement is in flight the next batch queues up. Claims and completions
 * thus run concurrently on two connections instead of taking turns (ADR 008).
 *
 * A start record (a prefetched job taking a freed slot) has a batch of its own, written at once and
 * committed without waiting for the WAL flush: its handler waits for it, and it must wait neither for a
 * completion batch nor for an fsync. A start lost in a PostgreSQL crash makes its attempt look never
 * started, so the rescue gives the job back without consuming the attempt and it runs again
 * (at-least-once holds; that attempt is not counted). The job's completion commits synchronously, which
 * flushes its start first.
 *
 * A batch that fails is retried through an outage for the retry budget (`outcome_retry.ts`). A batch
 * that fails with a data error is split in halves until the item PostgreSQL refuses is alone; that
 * attempt fails for good with `result cannot be stored` and its neighbours complete.
 */
import { type HistogramHandle, timed } from "../metrics/registry.ts";
import type { AttemptRef, Completion, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { Batcher } from "../db/batcher.ts";
import { isDataError, retryWithin } from "./outcome_retry.ts";

/**
 * How long a completion waits for others to share its statement. Without it, at `maxWorkers: 10` every
 * claim of 10 was followed by a completion statement of about 10; waiting 1 ms halves the completion
 * statements and the database CPU they take from the claims (drain at concurrency 10: +20 % here).
 */
export const COMPLETION_LINGER_MS = 1;

/** Options of the completer. */
export interface CompleterOptions {
  /** Delete completed rows instead of keeping them (`retention.completed === 0`). */
  deleteRows: boolean;
  /** How long a failing write is retried (ms). */
  retryBudgetMs: number;
  /** Fails an attempt whose result PostgreSQL refused (terminally, with `reason`). */
  unstorable: (item: Completion, reason: string) => Promise<void>;
  maxBatch?: number;
  /** A batch waits this long for more completions (group commit), unless it is full. */
  lingerMs?: number;
  /** Observes the run time of each completion statement (seconds). */
  statementTimer?: HistogramHandle;
}

export class Completer {
  private readonly batcher: Batcher<Completion, boolean>;
  private readonly starts: Batcher<AttemptRef, boolean>;

  constructor(
    private readonly engine: StorageEngine,
    private readonly logger: Logger,
    private readonly o: CompleterOptions,
  ) {
    this.batcher = new Batcher(
      async (items) => {
        const done = new Set(await this.write(items));
        return items.map((c) => done.has(c.id));
      },
      o.maxBatch ?? 1000,
      o.lingerMs ?? COMPLETION_LINGER_MS,
    );
    this.starts = new Batcher(
      async (items) => {
        const started = new Set(
          await retryWithin(
            () => this.engine.recordStarts(items),
            this.o.retryBudgetMs,
            this.logger,
            `recording ${items.length} start${items.length === 1 ? "" : "s"}`,
          ),
        );
        return items.map((i) => started.has(i.id));
      },
      o.maxBatch ?? 1000,
      0,
    );
  }

  /** Queues a completion; resolves true when it was written (false when the attempt was no longer current). */
  add(item: Completion): Promise<boolean> {
    return this.batcher.add(item);
  }

  /**
   * Queues the start record of a prefetched attempt; resolves true once it is committed (false when the
   * attempt is no longer this worker's: cancelled, rescued), rejects when it could not be written.
   */
  start(item: AttemptRef): Promise<boolean> {
    return this.starts.add(item);
  }

  /** Waits until everything queued is written. */
  async drain(): Promise<void> {
    await this.starts.drain();
    await this.batcher.drain();
  }

  private async write(items: Completion[]): Promise<number[]> {
    const timer = this.o.statementTimer;
    try {
      return await retryWithin(
        () => timed(timer, () => this.engine.complete(items, !this.o.deleteRows)),
        this.o.retryBudgetMs,
        this.logger,
        `recording ${items.length} completion${items.length === 1 ? "" : "s"}`,
      );
    } catch (e) {
      if (!isDataError(e)) {
        // The jobs stay `running`; the leader rescues them once their runtime stops heartbeating, or
        // their deadline passes (at-least-once).
        this.logger.error(`svc: could not record ${items.length} completions: ${(e as Error).message}`);
        return [];
      }
      if (items.length === 1) {
        await this.o.unstorable(items[0], (e as Error).message).catch((err) =>
          this.logger.error(`svc: could not fail job ${items[0].id}: ${(err as Error).message}`)
        );
        return [];
      }
      const half = Math.ceil(items.length / 2);
      const [a, b] = await Promise.all([this.write(items.slice(0, half)), this.write(items.slice(half))]);
      return [...a, ...b];
    }
  }
}

/**
 * Batches completions. A finished attempt frees its slot at once and its completion waits here: the
 * completer writes what has queued within a macrotask in one statement, and while that statement is in
 * flight the next batch queues up. Claims and completions thus run concurrently on two connections
 * instead of taking turns (ADR 008). Nothing is written when a held (prefetched) job starts: its attempt
 * was counted at claim, and its start time travels with its completion.
 *
 * A batch that fails is retried through an outage for the retry budget (`outcome_retry.ts`). A batch
 * that fails with a data error is split in halves until the item PostgreSQL refuses is alone; that
 * attempt fails for good with `result cannot be stored` and its neighbours complete.
 */
import { type HistogramHandle, timed } from "../metrics/registry.ts";
import type { AttemptRef, Completion, WorkerStore } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { Batcher, type BatchSink } from "../db/batcher.ts";
import { isDataError, retryWithin } from "./outcome_retry.ts";
import { describeThrown } from "../describe.ts";

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
  /** Told of attempts whose completion could not be written (the heartbeat names them; the leader ends them). */
  abandon?: (attempt: AttemptRef, reason: string) => void;
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

  constructor(
    private readonly engine: WorkerStore,
    private readonly logger: Logger,
    private readonly options: CompleterOptions,
  ) {
    this.batcher = new Batcher(
      async (items) => {
        const done = new Set(await this.write(items));
        return items.map((c) => done.has(c.id));
      },
      options.maxBatch ?? 1000,
      options.lingerMs ?? COMPLETION_LINGER_MS,
    );
  }

  /** Queues a completion; resolves true when it was written (false when the attempt was no longer current). */
  add(item: Completion): Promise<boolean> {
    return this.batcher.add(item);
  }

  /** Queues a completion; `sink` is told true when it was written (false: the attempt was no longer current). */
  addTo(item: Completion, sink: BatchSink<boolean>): void {
    this.batcher.addTo(item, sink);
  }

  /** Waits until everything queued is written. */
  async drain(): Promise<void> {
    await this.batcher.drain();
  }

  private async write(items: Completion[]): Promise<number[]> {
    const timer = this.options.statementTimer;
    try {
      return await retryWithin(
        () => timed(timer, () => this.engine.complete(items, { keepCompleted: !this.options.deleteRows })),
        this.options.retryBudgetMs,
        this.logger,
        `recording ${items.length} completion${items.length === 1 ? "" : "s"}`,
      );
    } catch (e) {
      const why = describeThrown(e);
      if (!isDataError(e)) {
        // The jobs stay `running` in the database: the heartbeat names them and the leader's rescue
        // retries them (at-least-once).
        this.logger.error(`svc: could not record ${items.length} completions: ${why}`);
        for (const c of items) {
          this.options.abandon?.(c, `could not record the completion: ${why}`);
          this.engine.forgetAttempt?.(c); // the engine kept what it knew of the attempt for a retry
        }
        return [];
      }
      if (items.length === 1) {
        await this.options.unstorable(items[0], why).catch((err) => {
          this.logger.error(`svc: could not fail job ${items[0].id}: ${describeThrown(err)}`);
          this.options.abandon?.(items[0], `could not record the failure: ${describeThrown(err)}`);
          this.engine.forgetAttempt?.(items[0]);
        });
        return [];
      }
      const half = Math.ceil(items.length / 2);
      const [a, b] = await Promise.all([this.write(items.slice(0, half)), this.write(items.slice(half))]);
      return [...a, ...b];
    }
  }
}

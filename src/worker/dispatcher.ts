/**
 * One dispatcher per queue: `claimers` claim loops share `maxWorkers` slots. A loop reserves the free
 * slots before it claims, so a batch never takes more jobs than there are slots to run them.
 */
import type { KindPolicy, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { execute, type ExecutorDeps, type InFlight } from "./executor.ts";
import { sleep, Wakeup } from "./wakeup.ts";
import { nextMacrotask } from "../runtime/runtime.ts";

/** Per-queue settings. */
export interface QueueConfig {
  /** Jobs of this queue run at once in this process (default 10). */
  maxWorkers?: number;
  /** Claim loops (default 1). */
  claimers?: number;
}

export class Dispatcher {
  readonly maxWorkers: number;
  readonly claimers: number;
  /** Most slots one claim loop takes at a time. */
  private readonly share: number;
  private reserved = 0;
  private stopping = false;
  private loops: Promise<void>[] = [];
  private readonly wakeups: Wakeup[] = [];
  /** Last time each claim loop went round. */
  private readonly ticks: number[] = [];

  constructor(
    readonly queue: string,
    cfg: QueueConfig,
    private readonly engine: StorageEngine,
    private readonly deps: ExecutorDeps,
    private readonly inFlight: Map<number, InFlight>,
    private readonly runtimeId: string,
    /** The retry policy and deadline of each kind this worker runs (stored with each attempt at claim). */
    private readonly policies: () => Record<string, KindPolicy>,
    private readonly pollInterval: number,
    private readonly logger: Logger,
    /** Kinds whose claim registers an HTTP callback, with its timeout. */
    private readonly callbackTimeoutsMs: Record<string, number> = {},
  ) {
    this.maxWorkers = cfg.maxWorkers ?? 10;
    this.claimers = cfg.claimers ?? 1;
    this.share = Math.ceil(this.maxWorkers / this.claimers);
    if (!Number.isInteger(this.maxWorkers) || this.maxWorkers < 1) {
      throw new Error(`queues.${queue}.maxWorkers must be a positive integer`);
    }
    if (!Number.isInteger(this.claimers) || this.claimers < 1) {
      throw new Error(`queues.${queue}.claimers must be a positive integer`);
    }
  }

  /** Attempts of this queue running now. */
  running = 0;
  /** The last claim filled every free slot, so more jobs may be waiting. */
  private backlog = false;

  start(): void {
    for (let i = 0; i < this.claimers; i++) {
      this.wakeups.push(new Wakeup());
      this.ticks.push(Date.now());
      this.loops.push(this.loop(i));
    }
  }

  /** A job of this queue may be available (NOTIFY) or a slot was freed. */
  wake(): void {
    this.wakeups.forEach((w) => w.notify());
  }

  /** Whether every claim loop went round within three poll intervals. */
  alive(now = Date.now()): boolean {
    return !this.stopping && this.ticks.every((t) => now - t < 3 * this.pollInterval + 1000);
  }

  /** Stops claiming; resolves when the claim loops have exited (running attempts go on). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await Promise.all(this.loops);
  }

  private async loop(i: number): Promise<void> {
    const wakeup = this.wakeups[i];
    let failures = 0;
    let yielded = false;
    while (!this.stopping) {
      this.ticks[i] = Date.now();
      // Each claim loop takes at most its share of the slots, so several claims are in flight at
      // once instead of one loop taking every free slot.
      const free = Math.min(this.maxWorkers - this.running - this.reserved, this.share);
      if (free <= 0) {
        await wakeup.wait(this.pollInterval);
        continue;
      }
      if (free < this.share && this.running > 0 && !yielded) {
        // Some attempts are still finishing: let everything that completes in this macrotask free its
        // slot first, so one claim takes them all instead of one claim per freed slot.
        yielded = true;
        await nextMacrotask();
        continue;
      }
      yielded = false;
      this.reserved += free;
      let claimed;
      try {
        claimed = await this.engine.claim({
          queue: this.queue,
          limit: free,
          free,
          runtimeId: this.runtimeId,
          policies: this.policies(),
          callbackTimeoutsMs: this.callbackTimeoutsMs,
          prefetchTtlMs: 0,
        });
        failures = 0;
      } catch (e) {
        this.reserved -= free;
        failures++;
        this.logger.error(`svc: claim on queue ${this.queue} failed: ${(e as Error).message}`);
        await sleep(Math.min(this.pollInterval * 2 ** failures, 10_000));
        continue;
      }
      this.reserved -= free;
      this.backlog = claimed.length >= free;
      for (const job of claimed) {
        this.running++;
        const f = execute(job, this.deps, () => {
          this.running--;
          this.inFlight.delete(job.id);
          if (this.backlog) this.wake();
        });
        this.inFlight.set(job.id, f);
      }
      if (claimed.length < free && !this.stopping) await wakeup.wait(this.pollInterval);
    }
  }
}

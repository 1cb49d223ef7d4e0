/** The heartbeat loop: heartbeats held attempts (running and prefetched) and this process's runtimes row. */
import type { AttemptRef, RuntimeReport, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import { Wakeup } from "../timing.ts";
import { describeThrown } from "../describe.ts";

export class HeartbeatLoop {
  private stopping = false;
  private loop: Promise<void> | null = null;
  private readonly wakeup = new Wakeup();
  lastTick = 0;
  /** Whether the last heartbeat reached the database. */
  lastOk = false;
  /** When a heartbeat last reached the database (ms since the epoch; 0: never). */
  lastOkAt = 0;
  /**
   * When a heartbeat reached the database after none had for `stallMs` (the process was stopped, or cut
   * off from the database, long enough for the leader to rescue its attempts); 0: never.
   */
  stalledAt = 0;

  constructor(
    private readonly engine: StorageEngine,
    /** The attempts this process holds: running ones and prefetched ones. */
    private readonly attempts: () => AttemptRef[],
    private readonly report: () => RuntimeReport,
    readonly intervalMs: number,
    private readonly logger: Logger,
    /** Runs before the runtime's row is written (forgets abandoned attempts that have ended). */
    private readonly before: () => Promise<void> = () => Promise.resolve(),
    /** A gap between successful heartbeats this long is a stall (`stalledAt`). */
    readonly stallMs: number = Infinity,
  ) {}

  /** Beats once now (awaited at start so the runtime row exists before claiming). */
  async beat(): Promise<void> {
    try {
      await this.engine.heartbeat?.(this.attempts());
      await this.before();
      await this.engine.upsertRuntime(this.report());
      this.lastOk = true;
      const now = Date.now();
      if (this.lastOkAt && now - this.lastOkAt >= this.stallMs) this.stalledAt = now;
      this.lastOkAt = now;
    } catch (e) {
      this.lastOk = false;
      this.logger.error(`svc: heartbeat failed: ${describeThrown(e)}`);
    }
    this.lastTick = Date.now();
  }

  start(): void {
    this.loop = (async () => {
      while (!this.stopping) {
        await this.wakeup.wait(this.intervalMs);
        if (!this.stopping) await this.beat();
      }
    })();
  }

  /** Beats now, out of turn (readiness changed). */
  poke(): void {
    this.wakeup.notify();
  }

  alive(now = Date.now()): boolean {
    return !this.stopping && this.lastOk && now - this.lastTick < 3 * this.intervalMs;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeup.notify();
    await this.loop;
  }
}

/** The heartbeat loop: heartbeats in-flight attempts and this process's runtimes row. */
import type { RuntimeReport, StorageEngine } from "../storage/engine.ts";
import type { Logger } from "../types.ts";
import type { InFlight } from "./executor.ts";
import { Wakeup } from "./wakeup.ts";

export class HeartbeatLoop {
  private stopping = false;
  private loop: Promise<void> | null = null;
  private readonly wakeup = new Wakeup();
  lastTick = 0;
  /** Whether the last heartbeat reached the database. */
  lastOk = false;

  constructor(
    private readonly engine: StorageEngine,
    private readonly inFlight: Map<number, InFlight>,
    private readonly report: () => RuntimeReport,
    readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  /** Beats once now (awaited at start so the runtime row exists before claiming). */
  async beat(): Promise<void> {
    try {
      const items = [...this.inFlight.values()].map((f) => ({ id: f.job.id, lease: f.job.lease }));
      await this.engine.heartbeat(items);
      await this.engine.upsertRuntime(this.report());
      this.lastOk = true;
    } catch (e) {
      this.lastOk = false;
      this.logger.error(`svc: heartbeat failed: ${(e as Error).message}`);
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

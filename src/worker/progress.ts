/**
 * Writes `ctx.progress` values: the latest value per job wins, and one statement at most once a second
 * carries the news of every job (so each job's value is written at most once a second). Progress is
 * best effort: a write that fails is tried again with the next one (a newer value of the job replaces it),
 * and a job's value is never written for a lease older than one already stored.
 */
import type { ProgressItem } from "../storage/shared/progress.ts";
import type { Job, Logger } from "../types.ts";
import { describeThrown } from "../describe.ts";

/** How often progress is written (ms): each job's value at most this often. */
export const PROGRESS_INTERVAL_MS = 1_000;

export class ProgressWriter {
  private pending = new Map<number, ProgressItem>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private flushing: Promise<void> | null = null;
  private lastFlush = 0;
  private closed = false;

  constructor(
    private readonly write: (items: ProgressItem[]) => Promise<void>,
    private readonly logger: Logger,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  /** Takes a checked value (JSON text) of a job's attempt; replaces the one waiting for that job. */
  report(job: Job, json: string): void {
    if (this.closed) return;
    this.pending.set(job.id, { id: job.id, lease: job.lease, json, at: new Date() });
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.flushing || this.pending.size === 0) return;
    const wait = Math.max(0, this.lastFlush + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flushing = this.flush().finally(() => {
        this.flushing = null;
        this.schedule();
      });
    }, wait);
  }

  private async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const items = [...this.pending.values()];
    this.pending = new Map();
    this.lastFlush = Date.now();
    try {
      await this.write(items);
    } catch (e) {
      // Kept for the next write unless a newer value of the job came meanwhile.
      for (const it of items) if (!this.pending.has(it.id)) this.pending.set(it.id, it);
      this.logger.warn(`svc: could not write the progress of ${items.length} job(s): ${describeThrown(e)}`);
    }
  }

  /** Writes what is waiting (once) and stops taking values (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flushing;
    await this.flush();
  }
}

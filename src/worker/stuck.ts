/**
 * Handlers that did not return after their attempt was aborted (cancel, deadline, shutdown). An aborted
 * attempt's outcome is written at once, but its slot stays taken until the handler's promise settles, so
 * a handler that ignores `ctx.signal` cannot push real concurrency above `maxWorkers`. One that has not
 * returned within the grace after its abort is stuck: logged, counted by the `svc_jobs_stuck` gauge and
 * named in the runtime's heartbeat (`health.stuck_handlers`, shown on the UI's Running page) until it
 * returns.
 */
import type { Logger, StuckHandlerInfo } from "../types.ts";

/** At most this many are named in one heartbeat (the oldest first). */
export const MAX_REPORTED = 100;

/** A stuck handler, as the heartbeat names it. */
export type StuckHandler = StuckHandlerInfo;

export class StuckHandlers {
  private readonly items = new Set<StuckHandler>();

  constructor(private readonly logger: Logger) {}

  get size(): number {
    return this.items.size;
  }

  /** What the next heartbeat names. */
  list(): StuckHandler[] {
    return [...this.items].slice(0, MAX_REPORTED);
  }

  /** Stuck handlers per queue (the gauge). */
  byQueue(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.items) out.set(s.queue, (out.get(s.queue) ?? 0) + 1);
    return out;
  }

  /**
   * Watches a handler aborted at `abortedAt`: if `settled` has not settled `graceMs` after the abort, it
   * is stuck until it does. Resolves when the handler has settled.
   */
  async watch(
    h: Omit<StuckHandler, "aborted_at">,
    abortedAt: number,
    settled: Promise<unknown>,
    graceMs: number,
  ): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const inTime = await Promise.race([
      settled.then(() => true, () => true),
      new Promise<false>((r) =>
        timer = setTimeout(() => r(false), Math.max(0, abortedAt + graceMs - Date.now()))
      ),
    ]);
    clearTimeout(timer);
    if (inTime) return;
    const entry: StuckHandler = { ...h, aborted_at: new Date(abortedAt).toISOString() };
    this.items.add(entry);
    this.logger.warn(
      `svc: the handler of job ${h.job_id} (${h.kind}, queue ${h.queue}) has not returned ${graceMs} ms after ` +
        `its abort (${h.reason}); it ignores ctx.signal and keeps its slot until it returns`,
    );
    try {
      await settled.catch(() => {});
    } finally {
      this.items.delete(entry);
      this.logger.info(
        `svc: the stuck handler of job ${h.job_id} returned ${
          Date.now() - abortedAt
        } ms after its abort; its slot is free`,
      );
    }
  }

  /** Waits up to `ms` for every stuck or aborted handler in `pending` to settle; returns those that did not. */
  static async settleWithin(pending: Promise<unknown>[], ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled(pending),
      new Promise((r) => timer = setTimeout(r, ms)),
    ]);
    clearTimeout(timer);
  }
}

/**
 * LISTEN/NOTIFY through the driver (postgres.js: one dedicated connection that re-listens after a
 * reconnect; a driver of your own: its `listen`), with the polling fallback: when
 * `listen` is off or LISTEN fails, subscribers are simply never called and the dispatchers' poll
 * interval does the work.
 */
import type { Driver } from "../db/driver.ts";
import type { Logger } from "../types.ts";

/** Subscribes to channels. */
export interface Notifier {
  /** Whether LISTEN is active. */
  readonly listening: boolean;
  subscribe(channel: string, fn: (payload: string) => void): Promise<void>;
  close(): Promise<void>;
}

/** A notifier that never calls back (`listen: false`). */
export function pollingNotifier(): Notifier {
  return { listening: false, subscribe: async () => {}, close: async () => {} };
}

/** LISTEN through the driver; falls back to polling when LISTEN fails. */
export function listenNotifier(driver: Pick<Driver, "listen">, logger: Logger): Notifier {
  const unlistens: (() => Promise<void>)[] = [];
  let ok = true;
  return {
    get listening() {
      return ok;
    },
    async subscribe(channel, fn) {
      if (!ok) return;
      try {
        unlistens.push(await driver.listen(channel, fn));
      } catch (e) {
        ok = false;
        logger.warn(`svc: LISTEN ${channel} failed (${(e as Error).message}); falling back to polling`);
      }
    },
    async close() {
      await Promise.allSettled(unlistens.map((u) => u()));
    },
  };
}

/**
 * Waiting: `sleep`, and `Wakeup`, a wake-up that is never lost (`notify` before `wait` makes the next `wait`
 * return at once). Used by the worker, the driver's batcher, `svc dev` and the CLI.
 */
/** A wake-up that is never lost: `notify` before `wait` makes the next `wait` return at once. */
export class Wakeup {
  private pending = false;
  private waiter: (() => void) | null = null;

  notify(): void {
    this.pending = true;
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** Resolves on `notify` or after `ms`. */
  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.waiter = null;
        resolve();
      }, ms);
      this.waiter = () => {
        clearTimeout(t);
        this.pending = false;
        resolve();
      };
    });
  }
}

/** Sleeps for `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

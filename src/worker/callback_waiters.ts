/** In-process waiters of callbacks, woken by NOTIFY on the callbacks channel (with a slow poll as backstop). */
export class CallbackWaiters {
  private waiters = new Map<string, Set<() => void>>();

  /** Registers `fn` to run when the callback is resolved; returns the unregister function. */
  on(callbackId: string, fn: () => void): () => void {
    const id = callbackId.toLowerCase();
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, set = new Set());
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.waiters.delete(id);
    };
  }

  /** Called with a NOTIFY payload. */
  wake(callbackId: string): void {
    this.waiters.get(callbackId.toLowerCase())?.forEach((fn) => fn());
  }
}

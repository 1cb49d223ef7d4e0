/**
 * The `ctx` a handler receives: its abort signal (cancel, deadline, shutdown) and in-process sequential
 * callbacks (`registerCallback` / `waitForCallback`, resolved by `client.resumeExternal`).
 */
import type { StorageEngine } from "../storage/engine.ts";
import type { Job } from "../types.ts";
import type { CallbackWaiters } from "./callback_waiters.ts";
import { Wakeup } from "./wakeup.ts";
import { SvcError, ValidationError } from "../errors.ts";

/** What a handler gets beside its job. */
export interface JobContext {
  /** Aborts on cancel, hard deadline and shutdown; `signal.reason` says which. */
  readonly signal: AbortSignal;
  /** Registers a callback for this attempt; returns its id (a UUID) to hand to the external system. */
  registerCallback(opts?: { timeout?: number }): Promise<string>;
  /**
   * Parks the job in `waiting_external` until `client.resumeExternal(id, payload)`, then returns the payload.
   * Rejects when the callback times out, fails, or the job is completed through the HTTP `complete` endpoint.
   */
  waitForCallback(callbackId: string): Promise<unknown>;
  /**
   * The W3C `traceparent` of this attempt's span (a child of the producer's span when it enqueued inside
   * one), to propagate to systems the handler calls; null when there is none.
   */
  readonly traceparent: string | null;
}

/**
 * Why a handler's signal was aborted. `cancelled`: the job was changed under the attempt by someone
 * else: cancelled, or (canonical engine) rescued by the leader (deadline passed, heartbeat stale), which
 * the leader announces on the same NOTIFY channel as a cancel (docs/guide/handlers.md, "The abort signal").
 */
export type AbortReason = "cancelled" | "deadline" | "shutdown";

/** Raised by `waitForCallback` when the callback ends otherwise than by `resumeExternal`. */
export class CallbackEndedError extends SvcError {
  constructor(message: string) {
    super(message, "callback_ended");
    this.name = "CallbackEndedError";
  }
}

const DEFAULT_CALLBACK_TIMEOUT = 3_600_000;

export function createJobContext(
  job: Job,
  signal: AbortSignal,
  engine: StorageEngine,
  waiters: CallbackWaiters,
  pollMs: number,
  /** Told of each callback registered. */
  onRegistered: () => void = () => {},
  traceparent: string | null = null,
): JobContext {
  return {
    signal,
    traceparent,
    async registerCallback(opts = {}) {
      const timeout = opts.timeout ?? DEFAULT_CALLBACK_TIMEOUT;
      if (!Number.isFinite(timeout) || timeout <= 0) {
        throw new ValidationError("registerCallback: timeout must be > 0 ms");
      }
      const id = await engine.registerCallback(job.id, job.lease, timeout, "in_process");
      if (!id) throw new CallbackEndedError(`job ${job.id} is no longer running this attempt`);
      onRegistered();
      return id;
    },
    async waitForCallback(callbackId) {
      const wake = new Wakeup();
      const off = waiters.on(callbackId, () => wake.notify());
      const onAbort = () => wake.notify();
      signal.addEventListener("abort", onAbort);
      try {
        await engine.park(job.id, job.lease, callbackId);
        for (;;) {
          if (signal.aborted) throw new CallbackEndedError(`wait aborted: ${signal.reason}`);
          const cb = await engine.getCallback(callbackId);
          if (!cb || cb.jobId !== job.id) {
            throw new CallbackEndedError(`callback ${callbackId} not found for this job`);
          }
          if (cb.state === "completed") {
            if (cb.resolution === "resumed") return cb.payload;
            throw new CallbackEndedError(`job ${job.id} was completed through its callback`);
          }
          if (cb.state === "failed") throw new CallbackEndedError(`callback failed: ${cb.error}`);
          if (cb.state === "expired") throw new CallbackEndedError("callback timed out");
          if (cb.state === "superseded") {
            throw new CallbackEndedError("callback superseded by a later attempt");
          }
          await wake.wait(pollMs);
        }
      } finally {
        off();
        signal.removeEventListener("abort", onAbort);
      }
    },
  };
}

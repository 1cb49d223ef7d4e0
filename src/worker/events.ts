/** The worker's event hooks (all optional; a throwing hook is logged, never fatal). */
import type { Job, Logger } from "../types.ts";
import { describeThrown } from "../describe.ts";

export interface WorkerEvents {
  completed?: (job: Job) => void;
  failed?: (job: Job, error: unknown) => void;
  retried?: (job: Job, error: unknown) => void;
  snoozed?: (job: Job, delayMs: number) => void;
  /** @deprecated Never called: a cancelled job is not reported to the worker that ran it. */
  cancelled?: (job: Job) => void;
  rescued?: (job: { id: number; kind: string; state: string }, reason: string) => void;
  leader?: (isLeader: boolean) => void;
}

/** Calls a hook, logging what it throws. */
export function emit<K extends keyof WorkerEvents>(
  on: WorkerEvents,
  logger: Logger,
  name: K,
  ...args: Parameters<NonNullable<WorkerEvents[K]>>
): void {
  const fn = on[name] as ((...a: unknown[]) => void) | undefined;
  if (!fn) return;
  try {
    fn(...args);
  } catch (e) {
    logger.warn(`svc: on.${name} hook threw: ${describeThrown(e)}`);
  }
}

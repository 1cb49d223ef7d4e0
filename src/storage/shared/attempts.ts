/** What both engines' claims and rescues share: the claim's policies as SQL reads them, and the deadline grace. */
import type { ClaimRequest } from "../engine.ts";

/** The policies as the claim statement reads them. */
export function policiesJson(req: ClaimRequest): string {
  const out: Record<string, unknown> = {};
  for (const [kind, p] of Object.entries(req.policies)) {
    out[kind] = { max_attempts: p.maxAttempts, timeout_ms: p.timeoutMs, delays_ms: p.delaysMs };
  }
  return JSON.stringify(out);
}

/**
 * How long after an attempt's hard deadline the leader steps in. The worker running it enforces the
 * deadline itself (its handler's signal aborts with reason `deadline`); the leader is the backstop for
 * a worker that cannot (an event loop blocked by the handler), so it leaves the worker this long first.
 */
export const DEADLINE_GRACE_MS = 2_000;

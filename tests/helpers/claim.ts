/** Claims jobs straight through the storage engine, as a worker's dispatcher would. */
import type { Client } from "../../src/client/client.ts";
import type { Claimed } from "../../src/storage/engine.ts";

/** Claims up to `limit` jobs of `queue` for `runtimeId`; `timeoutsMs` and `callbackTimeoutsMs` per kind. */
export function claim(
  client: Client,
  queue: string,
  limit: number,
  runtimeId: string,
  timeoutsMs: Record<string, number> = {},
  callbackTimeoutsMs: Record<string, number> = {},
): Promise<Claimed> {
  return client.engine.claim({
    queue,
    limit,
    free: limit,
    runtimeId,
    policies: Object.fromEntries(Object.entries(timeoutsMs).map(([k, t]) => [k, { timeoutMs: t }])),
    callbackTimeoutsMs,
    prefetchTtlMs: 0,
  });
}

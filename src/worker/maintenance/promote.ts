/** Leader duty: due `scheduled` and `retryable` jobs become `available` (their queues are woken). */
import type { MaintenanceContext } from "./maintenance.ts";

export async function promote(m: MaintenanceContext): Promise<void> {
  const n = await m.engine.promote();
  if (n > 0) m.logger.debug(`svc: promoted ${n} jobs`);
}

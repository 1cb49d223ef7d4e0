/** Leader duty: parked attempts whose callback deadline passed become `retryable` (or `failed` when exhausted). */
import type { MaintenanceContext } from "./maintenance.ts";

export async function expireCallbacks(m: MaintenanceContext): Promise<void> {
  for (const job of await m.engine.expireCallbacks()) {
    m.metrics?.f.svc_callbacks_timed_out_total.with(m.metrics.kindLabel(job.kind)).inc();
    m.logger.info(`svc: callback of job ${job.id} (${job.kind}) timed out; now ${job.state}`);
  }
}

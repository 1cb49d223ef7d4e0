/** Leader duty: running attempts with a stale heartbeat or a passed deadline are retried or failed. */
import type { MaintenanceContext } from "./maintenance.ts";
import { emit } from "../events.ts";

export async function rescue(m: MaintenanceContext): Promise<void> {
  for (const job of await m.engine.rescue(m.rescueAfter)) {
    m.metrics?.f.svc_jobs_rescued_total.with(m.metrics.kindLabel(job.kind)).inc();
    m.logger.warn(`svc: rescued job ${job.id} (${job.kind}): ${job.reason}; now ${job.state}`);
    emit(m.on, m.logger, "rescued", job, job.reason);
  }
}

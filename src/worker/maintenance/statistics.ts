/** Leader duty: ANALYZE the jobs and callbacks tables when their statistics are missing or far behind (plans depend on them). */
import type { MaintenanceContext } from "./maintenance.ts";

export async function statistics(m: MaintenanceContext): Promise<void> {
  if (await m.engine.refreshStatistics()) {
    m.logger.debug("svc: analyzed the job tables (statistics were missing or stale)");
  }
}

/** Leader duty: ANALYZE the jobs table when its statistics are missing or far behind (claim plans depend on them). */
import type { MaintenanceContext } from "./maintenance.ts";

export async function statistics(m: MaintenanceContext): Promise<void> {
  if (await m.engine.refreshStatistics()) m.logger.debug("svc: analyzed the jobs table (statistics were missing or stale)");
}

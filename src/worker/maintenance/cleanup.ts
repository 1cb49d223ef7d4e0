/** Leader duty: finished jobs past their retention are deleted (at most once a minute). */
import type { MaintenanceContext } from "./maintenance.ts";

export async function cleanup(m: MaintenanceContext): Promise<void> {
  const n = await m.engine.cleanup(m.retention);
  if (n > 0) m.logger.debug(`svc: deleted ${n} finished jobs past retention`);
}

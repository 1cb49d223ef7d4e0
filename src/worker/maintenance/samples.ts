/**
 * Leader duty: per-minute samples for the dashboard's charts and the Kinds page (each finished minute
 * written once, a few seconds after it ends; see src/storage/shared/samples.ts).
 */
import type { MaintenanceContext } from "./maintenance.ts";

export async function samples(m: MaintenanceContext): Promise<void> {
  if (await m.engine.samples.record()) m.logger.debug("svc: recorded the samples of the last minute");
}

/**
 * Leader duty (queue storage): rotates the ring once the current slot is old enough, moves attempts that
 * have run for long out of sealed slots, reclaims finished slots with TRUNCATE (forwarding a paused
 * backlog when the ring runs short of empty slots), and keeps the history partitions ahead of time.
 * Nothing on canonical.
 */
import type { MaintenanceContext } from "./maintenance.ts";

export async function ring(m: MaintenanceContext): Promise<void> {
  const r = await m.engine.maintainRing(m.retention, m.parkAfter);
  if (r.rotated !== null) m.logger.debug(`svc: ring rotated to slot ${r.rotated}`);
  if (r.moved > 0) m.logger.debug(`svc: moved ${r.moved} long attempts out of the ring`);
  for (const [slot, outcome] of Object.entries(r.pruned)) {
    m.metrics?.f.svc_ring_prune_total.with(outcome).inc();
    if (outcome === "pruned") m.logger.debug(`svc: ring slot ${slot} reclaimed`);
  }
}

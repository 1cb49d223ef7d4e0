/**
 * The leader's duties, one row each: its period, whether it waits one period after this process became
 * leader, and what it does. Each runs through the leader's fenced connection (src/worker/leader.ts). The
 * rescue (rescue.ts) and the cron fires (cron.ts, added by the worker when it has schedules) have files of
 * their own; the others are one engine call each.
 */
import type { Duty } from "./types.ts";
import { rescue } from "./rescue.ts";

/** The duties every leader runs, for a maintenance interval of `intervalMs`. */
export function standardDuties(intervalMs: number): Duty[] {
  return [
    {
      // Due `scheduled` and `retryable` jobs become `available` (their queues are woken).
      name: "promote",
      everyMs: intervalMs,
      run: async (m) => {
        const n = await m.engine.promote();
        if (n > 0) m.logger.debug(`svc: promoted ${n} jobs`);
      },
    },
    {
      // Parked attempts whose callback deadline passed become `retryable` (or `failed` when exhausted).
      name: "callback_timeouts",
      everyMs: intervalMs,
      run: async (m) => {
        for (const job of await m.engine.expireCallbacks()) {
          m.metrics?.f.svc_callbacks_timed_out_total.with(m.metrics.kindLabel(job.kind)).inc();
          m.logger.info(`svc: callback of job ${job.id} (${job.kind}) timed out; now ${job.state}`);
        }
      },
    },
    { name: "rescue", everyMs: intervalMs, run: rescue },
    {
      // Finished jobs past their retention are deleted.
      name: "cleanup",
      deferred: true,
      everyMs: 60_000,
      run: async (m) => {
        const n = await m.engine.cleanup(m.retention);
        if (n > 0) m.logger.debug(`svc: deleted ${n} finished jobs past retention`);
      },
    },
    {
      // ANALYZE the jobs and callbacks tables when their statistics are missing or far behind.
      name: "statistics",
      deferred: true,
      everyMs: Math.max(intervalMs, 5_000),
      run: async (m) => {
        if (await m.engine.refreshStatistics()) {
          m.logger.debug("svc: analyzed the job tables (statistics were missing or stale)");
        }
      },
    },
    {
      // Queue storage: rotates the ring once the current slot is old enough, moves attempts that have run for
      // long out of sealed slots, reclaims finished slots with TRUNCATE (forwarding a paused backlog when the
      // ring runs short of empty slots), and keeps the history partitions ahead of time. Nothing on canonical.
      name: "ring",
      deferred: true,
      everyMs: Math.max(intervalMs, 1_000),
      run: async (m) => {
        if (!m.engine.maintainRing) return;
        const r = await m.engine.maintainRing(m.retention, m.parkAfter);
        if (r.rotated !== null) m.logger.debug(`svc: ring rotated to slot ${r.rotated}`);
        if (r.moved > 0) m.logger.debug(`svc: moved ${r.moved} long attempts out of the ring`);
        for (const [slot, outcome] of Object.entries(r.pruned)) {
          m.metrics?.f.svc_ring_prune_total.with(outcome).inc();
          if (outcome === "pruned") m.logger.debug(`svc: ring slot ${slot} reclaimed`);
        }
      },
    },
    {
      // Per-minute samples for the dashboard's charts and the Kinds page (each finished minute written once, a
      // few seconds after it ends; see src/storage/shared/samples.ts).
      name: "samples",
      deferred: true,
      everyMs: Math.max(intervalMs, 5_000),
      run: async (m) => {
        if (await m.engine.samples.record()) m.logger.debug("svc: recorded the samples of the last minute");
      },
    },
  ];
}

/**
 * Leader duty: cron. Every maintenance tick the leader reads the active schedules with the
 * database's clock, works out which fire times are due, and enqueues them with one
 * compare-and-swap statement per schedule (`fireCron`): at most once per fire time, even when a
 * leader that has just lost its lock runs one more tick beside the new one.
 *
 * Due fire times are those after `max(last_fire_at, evaluate_from)` and at or before now. A fire
 * within the on-time window (`lateToleranceMs`) is enqueued whatever happens; older ones were
 * missed (no leader ran) and are coalesced into one run by default, the newest, or up to
 * `catch_up` of the newest are enqueued.
 */
import type { Logger } from "../../types.ts";
import { latestFireTimes } from "../../cron/schedule.ts";
import type { CronStore } from "../../storage/shared/cron.ts";
import type { Duty } from "./types.ts";

/** What to enqueue for one schedule. */
export interface FirePlan {
  /** Fire times to enqueue, ascending. */
  fires: Date[];
  /** The newest due fire time: the new `last_fire_at`. */
  newest: Date;
  /** Whether some due fire times were older than the on-time window. */
  late: boolean;
}

/** The pure part: which fire times of one schedule to enqueue now; null when none is due. */
export function planFires(
  s: { schedule: string; timezone: string; catchUp: number; after: Date },
  now: Date,
  lateToleranceMs: number,
): FirePlan | null {
  const onTimeMax = Math.ceil(lateToleranceMs / 1000) + 1; // fire times are at least a second apart
  const keepMissed = Math.max(1, s.catchUp);
  const due = latestFireTimes(s.schedule, s.timezone, s.after, now, keepMissed + onTimeMax);
  if (due.length === 0) return null;
  const lateBefore = now.getTime() - lateToleranceMs;
  const onTime = due.filter((d) => d.getTime() >= lateBefore).length;
  const fires = due.slice(-Math.max(keepMissed, onTime));
  return { fires, newest: due[due.length - 1], late: fires[0].getTime() < lateBefore };
}

/** Evaluates every active schedule once; returns the number of jobs enqueued. */
export async function evaluateCron(
  store: CronStore,
  lateToleranceMs: number,
  logger: Logger,
  broken: Set<string> = new Set(),
): Promise<number> {
  const { rows, now } = await store.active();
  let enqueued = 0;
  for (const r of rows) {
    const after = [r.last_fire_at, r.evaluate_from].filter(Boolean)
      .reduce((a: Date, b: Date) => (a.getTime() >= b.getTime() ? a : b));
    let plan: FirePlan | null;
    try {
      plan = planFires(
        { schedule: r.schedule, timezone: r.timezone, catchUp: Number(r.catch_up), after },
        now,
        lateToleranceMs,
      );
      broken.delete(r.name);
    } catch (e) {
      if (!broken.has(r.name)) {
        broken.add(r.name);
        logger.error(
          `svc: cron schedule ${r.name} cannot be evaluated (${(e as Error).message}); ` +
            `fix its declaration or remove it with \`svc cron remove ${r.name}\``,
        );
      }
      continue;
    }
    if (!plan) continue;
    const ids = await store.fire(r.name, r.last_fire_at ?? null, plan.newest, plan.fires);
    enqueued += ids.length;
    if (ids.length && plan.late) {
      logger.info(
        Number(r.catch_up) > 0
          ? `svc: cron ${r.name}: caught up ${ids.length} fire times from ${plan.fires[0].toISOString()} ` +
            `(catchUp ${r.catch_up}; older missed ones, if any, skipped)`
          : `svc: cron ${r.name}: missed fire times coalesced into one run at ${plan.newest.toISOString()}`,
      );
    }
    if (ids.length) logger.debug(`svc: cron ${r.name} enqueued jobs ${ids.join(", ")}`);
  }
  return enqueued;
}

/**
 * The cron duty, run on every maintenance tick. The on-time window is the larger of 5 s and three
 * maintenance intervals, so ordinary tick jitter and a quick leader hand-over never coalesce fires.
 */
export function cronDuty(store: CronStore, maintenanceIntervalMs: number): Duty {
  const lateToleranceMs = Math.max(5_000, 3 * maintenanceIntervalMs);
  const broken = new Set<string>();
  return {
    name: "cron",
    everyMs: 0,
    run: async (m) => {
      await evaluateCron(store, lateToleranceMs, m.logger, broken);
    },
  };
}

/**
 * The client's cron methods (used by `svc cron` and the admin API): list, add, trigger, pause,
 * resume, remove. Schedules are evaluated by the workers' elected leader, not here.
 */
import type { EnqueueOptions, Job } from "../types.ts";
import { CronNotFoundError } from "../errors.ts";
import {
  type CronDefinition,
  type CronSchedule,
  normalizeCron,
  rowToCron,
  validateCronName,
} from "../cron/definition.ts";
import type { CronStore } from "../storage/shared/cron.ts";

/** Cron methods of the client. */
export interface CronMethods {
  /** Every schedule in the cron table, by name, whichever deployment declared it. */
  listCron(): Promise<CronSchedule[]>;
  /** One schedule, or null. */
  getCron(name: string): Promise<CronSchedule | null>;
  /**
   * Creates or replaces a schedule by name (as a worker's `cron` option does at start). Its pause
   * state and last fire time are kept; a worker that declares the same name replaces it at its start.
   * `declaredBy` is shown by `svc cron list` (default `client`).
   */
  addCron(name: string, def: CronDefinition, opts?: { declaredBy?: string }): Promise<CronSchedule>;
  /** Enqueues the schedule's job now, outside its fire times (the schedule is not changed). */
  triggerCron(name: string): Promise<Job>;
  /** Stops the leader enqueuing the schedule's jobs. */
  pauseCron(name: string): Promise<CronSchedule>;
  /** Resumes a paused schedule; fire times that passed while it was paused are not enqueued. */
  resumeCron(name: string): Promise<CronSchedule>;
  /** Deletes the schedule (a worker still declaring it adds it back at its next start). */
  removeCron(name: string): Promise<void>;
}

type Enqueue = (kind: string, args: Record<string, unknown>, opts: EnqueueOptions) => Promise<Job>;

/** Binds the cron methods to a cron store. */
export function cronMethods(store: CronStore, enqueue: Enqueue): CronMethods {
  const mustGet = async (name: string) => {
    const row = await store.get(validateCronName(name));
    if (!row) throw new CronNotFoundError(name);
    return row;
  };
  const setPaused = async (name: string, paused: boolean) => {
    const row = await store.setPaused(validateCronName(name), paused);
    if (!row) throw new CronNotFoundError(name);
    return rowToCron(row, row.now);
  };
  return {
    async listCron() {
      const { rows, now } = await store.list();
      return rows.map((r) => rowToCron(r, now));
    },
    async getCron(name) {
      const row = await store.get(validateCronName(name));
      return row ? rowToCron(row, row.now) : null;
    },
    async addCron(name, def, o = {}) {
      const [row] = await store.upsert([normalizeCron(name, def)], o.declaredBy ?? "client");
      return rowToCron(row, row.now);
    },
    async triggerCron(name) {
      const c = await mustGet(name);
      return await enqueue(c.kind, c.args ?? {}, {
        queue: c.queue,
        priority: Number(c.priority),
        maxAttempts: Number(c.max_attempts),
        tags: c.tags ?? [],
        metadata: { ...(c.metadata ?? {}), cron: c.name, cron_trigger: "manual" },
      });
    },
    pauseCron: (name) => setPaused(name, true),
    resumeCron: (name) => setPaused(name, false),
    async removeCron(name) {
      if (!(await store.remove(validateCronName(name)))) throw new CronNotFoundError(name);
    },
  };
}

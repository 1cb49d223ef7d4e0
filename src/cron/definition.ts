/**
 * Cron schedules as users declare them (`cron` option of the worker, `svc cron add`) and as the
 * cron table returns them. Validation happens here, before anything is written: a bad expression,
 * time zone or option is a `ValidationError` naming the fix.
 *
 * @module
 */
import { ValidationError } from "../errors.ts";
import type { Row } from "../db/connection.ts";
import { normalizeEnqueue } from "../client/enqueue_input.ts";
import { DEFAULT_CRON_TIMEZONE, nextFireAfter, validateSchedule } from "./schedule.ts";

/** One schedule as declared: `cron: { nightly: { schedule: "0 3 * * *", kind: "report" } }`. */
export interface CronDefinition {
  /** 5 fields (`minute hour day-of-month month day-of-week`) or 6 with leading seconds; `@daily` etc. */
  schedule: string;
  /** Job kind enqueued at each fire. */
  kind: string;
  /** Args of the job (a JSON object; default `{}`). */
  args?: Record<string, unknown>;
  /** Queue of the job (default `default`). */
  queue?: string;
  /** IANA time zone the expression is read in (default `UTC`). */
  timezone?: string;
  /** 1 (highest) to 4; default 2. */
  priority?: number;
  /** 1..1000; default 25. */
  maxAttempts?: number;
  tags?: string[];
  /** Merged into each job's metadata, beside `cron` (the schedule's name) and `cron_fire_at`. */
  metadata?: Record<string, unknown>;
  /**
   * Fire times missed while no leader ran (later than the on-time window). Default `false`: they are
   * coalesced into one run, at the newest missed time. `true`: up to 100 of the newest are enqueued;
   * a number: up to that many (1..1000). Older ones are skipped.
   */
  catchUp?: boolean | number;
}

/** A schedule as stored in the cron table. */
export interface CronSchedule {
  name: string;
  schedule: string;
  timezone: string;
  kind: string;
  args: Record<string, unknown>;
  queue: string;
  priority: number;
  maxAttempts: number;
  tags: string[];
  metadata: Record<string, unknown>;
  /** Missed fires enqueued after downtime; 0 coalesces them into one. */
  catchUp: number;
  paused: boolean;
  /** The newest fire time enqueued; null before the first fire. */
  lastFireAt: Date | null;
  /** The next fire time the leader will enqueue; null while paused (or when it never fires again). */
  nextFireAt: Date | null;
  /** A worker's runtime id, or `cli`. */
  declaredBy: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** Last time a worker (or `svc cron add`) declared it. */
  syncedAt: Date;
}

/** A validated definition with its defaults filled in. */
export type NormalizedCron = Pick<
  CronSchedule,
  | "name"
  | "schedule"
  | "timezone"
  | "kind"
  | "args"
  | "queue"
  | "priority"
  | "maxAttempts"
  | "tags"
  | "metadata"
  | "catchUp"
>;

/** Cron names: 1 to 128 characters of `A-Z a-z 0-9 _ . : -` (they appear in CLI arguments and URLs). */
export const CRON_NAME_RE: RegExp = /^[A-Za-z0-9_.:-]{1,128}$/;

/** `catchUp: true` enqueues up to this many missed fires. */
export const CRON_CATCH_UP_DEFAULT: number = 100;
/** The most missed fires `catchUp` may ask for. */
export const CRON_CATCH_UP_MAX: number = 1000;

/** Throws a ValidationError unless `name` is a valid cron schedule name. */
export function validateCronName(name: unknown): string {
  if (typeof name !== "string" || !CRON_NAME_RE.test(name)) {
    throw new ValidationError(
      `invalid cron schedule name ${JSON.stringify(name)}: use 1 to 128 characters of A-Z a-z 0-9 _ . : -`,
    );
  }
  return name;
}

/** Validates one definition and fills its defaults. */
export function normalizeCron(name: string, def: CronDefinition): NormalizedCron {
  validateCronName(name);
  if (typeof def !== "object" || def === null) {
    throw new ValidationError(
      `cron.${name} must be an object such as { schedule: "0 3 * * *", kind: "report" }`,
    );
  }
  const timezone = def.timezone ?? DEFAULT_CRON_TIMEZONE;
  try {
    validateSchedule(def.schedule, timezone);
  } catch (e) {
    throw new ValidationError(`cron.${name}: ${(e as Error).message}`);
  }
  let job;
  try {
    job = normalizeEnqueue({
      kind: def.kind,
      args: def.args,
      queue: def.queue,
      priority: def.priority,
      maxAttempts: def.maxAttempts,
      tags: def.tags,
      metadata: def.metadata,
    });
  } catch (e) {
    throw new ValidationError(`cron.${name}: ${(e as Error).message}`);
  }
  return {
    name,
    schedule: def.schedule.trim(),
    timezone,
    kind: job.kind,
    args: job.args,
    queue: job.queue,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    tags: job.tags,
    metadata: job.metadata,
    catchUp: catchUpCount(name, def.catchUp),
  };
}

function catchUpCount(name: string, v: boolean | number | undefined): number {
  if (v === undefined || v === false) return 0;
  if (v === true) return CRON_CATCH_UP_DEFAULT;
  if (!Number.isInteger(v) || v < 0 || v > CRON_CATCH_UP_MAX) {
    throw new ValidationError(
      `cron.${name}.catchUp must be true, false or an integer from 0 to ${CRON_CATCH_UP_MAX}, got ${
        JSON.stringify(v)
      }`,
    );
  }
  return v;
}

/** Validates every definition of a worker's `cron` option. */
export function normalizeCronMap(defs: Record<string, CronDefinition>): NormalizedCron[] {
  if (typeof defs !== "object" || defs === null || Array.isArray(defs)) {
    throw new ValidationError(
      'cron must be an object keyed by name: { nightly: { schedule: "0 3 * * *", kind } }',
    );
  }
  return Object.entries(defs).map(([name, def]) => normalizeCron(name, def));
}

/** A cron-table row as a `CronSchedule`; `now` is the database's clock. */
export function rowToCron(r: Row, now: Date): CronSchedule {
  let next: Date | null = null;
  if (!r.paused) {
    const from = [r.last_fire_at, r.evaluate_from, now].filter(Boolean)
      .reduce((a: Date, b: Date) => (a.getTime() >= b.getTime() ? a : b));
    try {
      next = nextFireAfter(r.schedule, r.timezone, from);
    } catch { /* an expression this version cannot read: shown without a next fire */ }
  }
  return {
    name: r.name,
    schedule: r.schedule,
    timezone: r.timezone,
    kind: r.kind,
    args: r.args ?? {},
    queue: r.queue,
    priority: Number(r.priority),
    maxAttempts: Number(r.max_attempts),
    tags: r.tags ?? [],
    metadata: r.metadata ?? {},
    catchUp: Number(r.catch_up),
    paused: r.paused,
    lastFireAt: r.last_fire_at ?? null,
    nextFireAt: next,
    declaredBy: r.declared_by ?? null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    syncedAt: r.synced_at,
  };
}

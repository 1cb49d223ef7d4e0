/**
 * Cron schedules, pure: parse and validate an expression and compute its fire times. The leader's
 * cron duty and the admin API use these; nothing here touches the database or the clock except
 * where a caller passes a time. Parsing is done by `croner` (see `docs/adr/003-cron-parser.md`).
 *
 * Expressions have 5 fields (`minute hour day-of-month month day-of-week`) or 6 with a leading
 * seconds field (`second minute hour day-of-month month day-of-week`); nicknames such as `@daily`
 * work too. Day-of-month and day-of-week combine with OR, as in Vixie cron. Times are evaluated in
 * an IANA time zone, UTC when none is given. Across DST changes a fixed-time job (one value in
 * each of seconds, minutes and hours) that falls in the skipped hour runs right after the gap,
 * and in a repeated hour it runs once; other jobs skip the gap and run in both passes of a
 * repeated hour (Vixie cron's behaviour).
 *
 * @module
 */

import { Cron } from "npm:croner@11.0.1";
import { ValidationError } from "../errors.ts";

/** Time zone used when a schedule names none. */
export const DEFAULT_CRON_TIMEZONE: string = "UTC";

function checkTimezone(timezone: string): void {
  try {
    if (timezone === "") throw new RangeError("empty time zone"); // croner would read "" as local time
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new ValidationError(
      `unknown time zone ${JSON.stringify(timezone)}: use an IANA name such as "UTC" or "Europe/Berlin"`,
    );
  }
}

const NICKNAMES = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"];

function compile(expr: string, timezone: string | undefined): Cron {
  const tz = timezone ?? DEFAULT_CRON_TIMEZONE;
  checkTimezone(tz);
  const problem = (detail: string) =>
    new ValidationError(
      `invalid cron schedule ${JSON.stringify(expr)}: ${detail}; expected 5 fields ` +
        '("minute hour day-of-month month day-of-week", e.g. "0 3 * * *") or 6 with leading seconds',
    );
  const trimmed = typeof expr === "string" ? expr.trim() : "";
  if (trimmed === "") throw problem("it is empty");
  if (trimmed.startsWith("@")) {
    if (!NICKNAMES.includes(trimmed.toLowerCase())) {
      throw problem(`unknown nickname; use one of ${NICKNAMES.join(", ")}`);
    }
  } else {
    // Counted here because croner alone would also take 7 fields (with a year) and would read an
    // ISO 8601 date as a one-shot job.
    const fields = trimmed.split(/\s+/).length;
    if (fields !== 5 && fields !== 6) throw problem(`it has ${fields} field${fields === 1 ? "" : "s"}`);
  }
  try {
    // paused: a Cron without a callback starts no timer, and paused makes sure of it.
    return new Cron(expr, { timezone: tz, mode: "5-or-6-parts", paused: true });
  } catch (err) {
    throw problem(
      String(err instanceof Error ? err.message : err).replace(/^Cron\w*:\s*/, "").replace(/\.$/, ""),
    );
  }
}

function checkDate(name: string, d: Date): void {
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) {
    throw new ValidationError(`${name} must be a valid Date`);
  }
}

/**
 * Throws a ValidationError naming the problem when `expr` is not a valid 5- or 6-field cron expression,
 * when `timezone` is not a known IANA time zone (undefined means UTC), or when the expression can
 * never fire (such as `0 0 30 2 *`).
 */
export function validateSchedule(expr: string, timezone?: string): void {
  const cron = compile(expr, timezone);
  if (cron.nextRun(new Date()) === null) {
    throw new ValidationError(`invalid cron schedule ${JSON.stringify(expr)}: it never fires`);
  }
}

/**
 * The first fire time strictly after `after`, or null when the schedule never fires again.
 * `timezone` undefined means UTC. Throws like {@link validateSchedule} on a bad expression or zone.
 */
export function nextFireAfter(expr: string, timezone: string | undefined, after: Date): Date | null {
  checkDate("after", after);
  return compile(expr, timezone).nextRun(after);
}

/** Checks the arguments of a fire-time window and compiles the expression. */
function compileWindow(
  expr: string,
  timezone: string | undefined,
  after: Date,
  until: Date,
  max: number,
): Cron {
  checkDate("afterExclusive", after);
  checkDate("untilInclusive", until);
  if (!Number.isInteger(max) || max < 0) {
    throw new ValidationError(`max must be a non-negative integer, got ${max}`);
  }
  return compile(expr, timezone);
}

/**
 * Fire times in (`afterExclusive`, `untilInclusive`], ascending, at most `max` of them (the
 * earliest ones). `max` must be a non-negative integer. Throws like {@link validateSchedule}.
 */
export function fireTimesBetween(
  expr: string,
  timezone: string | undefined,
  afterExclusive: Date,
  untilInclusive: Date,
  max: number,
): Date[] {
  return runsForward(
    compileWindow(expr, timezone, afterExclusive, untilInclusive, max),
    afterExclusive,
    untilInclusive,
    max,
  );
}

/** The first `max` fire times of a compiled schedule in (`afterExclusive`, `untilInclusive`]. */
function runsForward(cron: Cron, afterExclusive: Date, untilInclusive: Date, max: number): Date[] {
  const times: Date[] = [];
  let cursor = afterExclusive;
  while (times.length < max) {
    const next = cron.nextRun(cursor);
    if (next === null || next.getTime() > untilInclusive.getTime()) break;
    times.push(next);
    cursor = next;
  }
  return times;
}

/**
 * The latest fire times in (`afterExclusive`, `untilInclusive`], ascending, at most `max` of them
 * (the newest ones). Costs as many steps as there are fire times in the window, `max` at most, so
 * the leader's per-tick evaluation stays cheap. Throws like {@link validateSchedule}.
 */
export function latestFireTimes(
  expr: string,
  timezone: string | undefined,
  afterExclusive: Date,
  untilInclusive: Date,
  max: number,
): Date[] {
  const cron = compileWindow(expr, timezone, afterExclusive, untilInclusive, max);
  const times = runsForward(cron, afterExclusive, untilInclusive, max + 1);
  if (times.length <= max) return times;
  // More than `max` are due (a long downtime): walk back from the end instead. croner's
  // previousRuns excludes its reference instant; fire times are whole seconds, so 1 ms past
  // `untilInclusive` includes a fire exactly at it.
  return cron.previousRuns(max, new Date(untilInclusive.getTime() + 1))
    .filter((d) => d.getTime() > afterExclusive.getTime())
    .reverse();
}

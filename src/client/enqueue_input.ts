/**
 * Validation of enqueue input. Invalid input throws before anything is written. The unique key is not
 * computed here: the options go to the database, whose `unique_key()` is the one definition.
 */
import { ValidationError } from "../errors.ts";
import { checkDate, checkJsonValue, checkText } from "../validation.ts";
import type { EnqueueItem, NewJob } from "../types.ts";

/** Queue names: 1 to 48 characters of A-Z a-z 0-9 _ . - */
export const QUEUE_NAME_RE: RegExp = /^[A-Za-z0-9_.-]{1,48}$/;

/** Throws a ValidationError unless `name` is a valid queue name. */
export function validateQueueName(name: unknown): string {
  if (typeof name !== "string" || !QUEUE_NAME_RE.test(name)) {
    throw new ValidationError(
      `invalid queue name ${JSON.stringify(name)}: use 1 to 48 characters of A-Z a-z 0-9 _ . -`,
    );
  }
  return name;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/** The longest limit key, in characters (the SQL API's `limit_key` has the same bound). */
export const LIMIT_KEY_MAX = 255;

/**
 * Throws a ValidationError unless `key` is a limit key: a string of 1 to 255 characters (counted as the
 * database counts them, by code point) that PostgreSQL can store. `what` names where it came from.
 */
export function checkLimitKey(what: string, key: unknown): string {
  if (
    typeof key !== "string" || key.length === 0 ||
    (key.length > LIMIT_KEY_MAX && [...key].length > LIMIT_KEY_MAX)
  ) {
    const got = typeof key === "string"
      ? `${[...key].length} characters`
      : key === null
      ? "null"
      : typeof key;
    throw new ValidationError(`${what} must be a string of 1 to ${LIMIT_KEY_MAX} characters, got ${got}`);
  }
  return checkText(what, key);
}

/** A W3C traceparent: version-traceid-parentid-flags in lowercase hex. */
const TRACEPARENT_RE = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Validates one job and fills its defaults. */
export function normalizeEnqueue(item: EnqueueItem): NewJob {
  const { kind } = item;
  if (typeof kind !== "string" || kind.length === 0 || kind.length > 255) {
    throw new ValidationError("kind must be a non-empty string of at most 255 characters");
  }
  checkText("kind", kind);
  const args = item.args === undefined ? {} : item.args;
  if (!isPlainObject(args)) throw new ValidationError(`args of ${kind} must be a JSON object`);
  checkJsonValue(`args of ${kind}`, args);
  const queue = validateQueueName(item.queue ?? "default");
  const priority = item.priority ?? 2;
  if (!Number.isInteger(priority) || priority < 1 || priority > 4) {
    throw new ValidationError(
      `priority must be an integer from 1 (highest) to 4, got ${JSON.stringify(priority)}`,
    );
  }
  const maxAttempts = item.maxAttempts ?? 25;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1000) {
    throw new ValidationError(
      `maxAttempts must be an integer from 1 to 1000, got ${JSON.stringify(maxAttempts)}`,
    );
  }
  const runAt = item.runAt ?? null;
  if (runAt !== null) checkDate("runAt", runAt);
  const tags = item.tags ?? [];
  if (!Array.isArray(tags) || tags.some((t) => typeof t !== "string")) {
    throw new ValidationError("tags must be an array of strings");
  }
  tags.forEach((t, i) => checkText(`tags[${i}]`, t));
  const metadata = item.metadata ?? {};
  if (!isPlainObject(metadata)) throw new ValidationError("metadata must be a JSON object");
  checkJsonValue("metadata", metadata);

  let unique: NewJob["unique"] = null;
  if (item.unique) {
    const u = item.unique;
    if (u.periodMs !== undefined && (!Number.isFinite(u.periodMs) || u.periodMs < 1)) {
      throw new ValidationError("unique.periodMs must be a positive number of milliseconds");
    }
    if (u.onConflict !== undefined && u.onConflict !== "return" && u.onConflict !== "error") {
      throw new ValidationError('unique.onConflict must be "return" or "error"');
    }
    unique = {
      byArgs: u.byArgs !== false,
      byQueue: u.byQueue === true,
      periodMs: u.periodMs === undefined ? null : Math.floor(u.periodMs),
    };
  }
  const traceContext = item.traceparent ?? null;
  if (traceContext !== null && (typeof traceContext !== "string" || !TRACEPARENT_RE.test(traceContext))) {
    throw new ValidationError("traceparent must be a W3C traceparent such as 00-<32 hex>-<16 hex>-01");
  }
  const limitKey = item.limitKey === undefined || item.limitKey === null
    ? null
    : checkLimitKey("limitKey", item.limitKey);
  return { kind, queue, args, priority, runAt, maxAttempts, tags, metadata, unique, traceContext, limitKey };
}

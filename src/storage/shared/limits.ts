/**
 * Fleet-wide limits per queue (ADR 019), shared by both engines: the `queue_limits` row, its setter, and
 * what a claim of a limited queue reads and writes. Every claim of a limited queue runs under the queue's
 * claim lock and asks `limit_budget` how many jobs it may take.
 */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { ValidationError } from "../../errors.ts";
import type { QueueLimit, QueueLimitInfo } from "../../types.ts";
import type { Throttle } from "../engine.ts";

/** Longest rate window: 24 hours. */
export const MAX_LIMIT_WINDOW_MS = 86_400_000;

function positiveInt(v: unknown, name: string, max = 2_147_483_647): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > max) {
    throw new ValidationError(`${name} must be an integer from 1 to ${max}`);
  }
  return v;
}

/** The limit as the SQL setter takes it ({concurrency, rate, per_ms, per_key, count_parked}); throws ValidationError. */
export function limitToSql(limit: QueueLimit): Record<string, number | boolean | null> {
  if (limit === null || typeof limit !== "object" || Array.isArray(limit)) {
    throw new ValidationError("limit must be an object such as { rate: 20, per: 1000 }");
  }
  for (const k of Object.keys(limit)) {
    if (!["concurrency", "rate", "per", "perKey", "countParked"].includes(k)) {
      throw new ValidationError(
        `limit: unknown field ${k}; the fields are concurrency, rate, per, perKey, countParked`,
      );
    }
  }
  const rate = positiveInt(limit.rate, "limit.rate");
  const per = positiveInt(limit.per, "limit.per (ms)", MAX_LIMIT_WINDOW_MS);
  if ((rate === null) !== (per === null)) {
    throw new ValidationError(
      "limit.rate and limit.per go together: at most `rate` claims in any window of `per` ms",
    );
  }
  const perKey = limit.perKey === undefined || limit.perKey === null
    ? null
    : positiveInt((limit.perKey as { concurrency?: unknown }).concurrency, "limit.perKey.concurrency");
  if (limit.countParked !== undefined && typeof limit.countParked !== "boolean") {
    throw new ValidationError("limit.countParked must be true or false");
  }
  return {
    concurrency: positiveInt(limit.concurrency, "limit.concurrency"),
    rate,
    per_ms: per,
    per_key: perKey,
    count_parked: limit.countParked ?? false,
  };
}

/** A limits row (the JSON of `queue_limit_json`) as the API shows it. */
export function limitInfoFromJson(queue: string, j: Row): QueueLimitInfo {
  return {
    queue,
    concurrency: j.concurrency ?? null,
    rate: j.rate ?? null,
    per: j.per_ms ?? null,
    perKey: j.per_key ?? null,
    countParked: j.count_parked === true,
    rateInForceAt: j.rate_in_force_at ? new Date(j.rate_in_force_at) : null,
    inUse: {
      rate: j.in_use?.rate ?? null,
      concurrency: j.in_use?.concurrency ?? null,
      perKey: j.in_use?.per_key ?? null,
    },
    setBy: j.set_by,
    updatedAt: new Date(j.updated_at),
  };
}

/** Translates the SQL setter's refusals (22023 bad value, 0A000 not available) into ValidationError. */
async function refusalsAsValidation<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "22023" || code === "0A000") throw new ValidationError((e as Error).message);
    throw e;
  }
}

/**
 * Writes the limits of `queue` (every kind not given is cleared); with `seed`, only when the queue has no
 * row yet. Returns the row that stands.
 */
export async function setQueueLimit(
  db: Db,
  n: SchemaNames,
  queue: string,
  limit: QueueLimit,
  setBy: string,
  seed = false,
): Promise<QueueLimitInfo> {
  const body = limitToSql(limit);
  return await refusalsAsValidation(async () => {
    const [r] = await db.query(
      `select ${n.q}.set_queue_limit($1, $2::text::jsonb, $3, $4) as j`,
      [queue, JSON.stringify(body), setBy, seed],
    );
    return limitInfoFromJson(queue, r.j);
  });
}

/** Deletes the limits row of `queue` (a worker's option may seed one again); whether there was one. */
export async function resetQueueLimit(db: Db, n: SchemaNames, queue: string): Promise<boolean> {
  const [r] = await db.query(`select ${n.q}.reset_queue_limit($1) as found`, [queue]);
  return r.found === true;
}

/** Every limits row, with the jobs claimed in each rate's current window. */
export async function queueLimits(db: Db, n: SchemaNames): Promise<QueueLimitInfo[]> {
  const rows = await db.query(
    `select l.queue, ${n.q}.queue_limit_json(l) as j from ${n.q}.queue_limits l order by l.queue`,
  );
  return rows.map((r) => limitInfoFromJson(r.queue, r.j));
}

/** The throttled row a claim of a limited queue ends with (job_id null), as the dispatcher reads it. */
export function throttleOf(r: Row): Throttle {
  return {
    limit: r.throttled,
    inUse: Number(r.in_use ?? 0),
    retryAt: r.retry_at ? new Date(r.retry_at) : null,
  };
}

/** Deletes the limit log's rows older than their queue's window (the leader's cleanup); how many. */
export async function pruneLimitLog(db: Db, n: SchemaNames): Promise<number> {
  const [r] = await db.query(`select ${n.q}.prune_limit_log() as n`);
  return Number(r.n);
}

/**
 * Callbacks: registration for the running attempt, reading, and resolution (complete/resume/fail/
 * heartbeat). Both engines keep callbacks in a table of the same shape and resolve them with SQL
 * functions of the same signature; `CallbackSql` names them for one engine.
 */
import type { Db, Row } from "../../db/connection.ts";
import type { CallbackRecord, CallbackResolution, ResolveAction, ResolveArgs } from "../engine.ts";
import { ItemFailure } from "../../db/batcher.ts";

/** Where one engine keeps its callbacks and how it resolves them (qualified SQL names). */
export interface CallbackSql {
  /** The callbacks table. */
  table: string;
  /** `(job bigint, lease int, timeout_ms bigint, kind text) returns uuid` */
  register: string;
  /** `(id uuid, action, payload jsonb, error, retryable, timeout_seconds) returns table(outcome, job_id, state, timeout_at)` */
  resolveOne: string;
  /** `(items json) returns table(ord, outcome, job_id, state, timeout_at)` */
  resolveBatch: string;
}

export async function registerCallback(
  db: Db,
  c: CallbackSql,
  id: number,
  lease: number,
  timeoutMs: number,
  kind: "in_process" | "http",
): Promise<string | null> {
  const rows = await db.query(`select ${c.register}($1, $2, $3, $4) as id`, [
    id,
    lease,
    Math.max(1, Math.round(timeoutMs)),
    kind,
  ]);
  return rows[0].id ?? null;
}

export function rowToCallback(r: Row): CallbackRecord {
  return {
    id: r.id,
    jobId: Number(r.job_id),
    attempt: Number(r.attempt),
    lease: Number(r.lease),
    kind: r.kind,
    state: r.state,
    resolution: r.resolution ?? null,
    payload: r.payload ?? null,
    error: r.error ?? null,
    deadlineAt: r.deadline_at,
    createdAt: r.created_at,
    resolvedAt: r.resolved_at ?? null,
    rejectedCount: Number(r.rejected_count ?? 0),
    lastRejection: r.last_rejection ?? null,
  };
}

export async function getCallback(db: Db, c: CallbackSql, id: string): Promise<CallbackRecord | null> {
  const rows = await db.query(`select * from ${c.table} where id = $1::uuid`, [id]);
  return rows.length ? rowToCallback(rows[0]) : null;
}

export async function listCallbacks(db: Db, c: CallbackSql, jobId: number): Promise<CallbackRecord[]> {
  const rows = await db.query(`select * from ${c.table} where job_id = $1 order by created_at`, [jobId]);
  return rows.map(rowToCallback);
}

/** One callback resolution: the callback, what to do, and that action's arguments. */
export interface ResolveRequest extends ResolveArgs {
  id: string;
  action: ResolveAction;
}

export function rowToResolution(r: Row): CallbackResolution {
  return {
    outcome: r.outcome,
    jobId: r.job_id === null ? null : Number(r.job_id),
    state: r.state ?? null,
    timeoutAt: r.timeout_at ?? null,
  };
}

/** Resolves one callback. */
export async function resolveCallback(
  db: Db,
  c: CallbackSql,
  q: ResolveRequest,
): Promise<CallbackResolution> {
  const rows = await db.query(
    `select * from ${c.resolveOne}($1::uuid, $2, $3::text::jsonb, $4, $5, $6)`,
    [
      q.id,
      q.action,
      q.payload === undefined ? null : JSON.stringify(q.payload),
      q.error ?? null,
      q.retryable ?? null,
      q.timeoutSeconds ?? null,
    ],
  );
  return rowToResolution(rows[0]);
}

/**
 * Resolves callbacks in one statement and one commit (`resolve_callbacks`), each exactly as
 * `resolveCallback` would. If the batch fails as a whole (a deadlock with another batch, or one item
 * the database refuses), every item is resolved on its own so that only the bad one fails.
 */
export async function resolveCallbacks(
  db: Db,
  c: CallbackSql,
  qs: ResolveRequest[],
): Promise<(CallbackResolution | ItemFailure)[]> {
  // Payloads can be up to 1 MiB each: statements carry at most BATCH_BYTES of them (or one item).
  const encoded = qs.map((q, ord) =>
    JSON.stringify({
      ord,
      id: q.id,
      action: q.action,
      payload: q.payload === undefined ? null : JSON.stringify(q.payload),
      error: q.error ?? null,
      retryable: q.retryable ?? null,
      timeout_seconds: q.timeoutSeconds ?? null,
    })
  );
  const out: (CallbackResolution | ItemFailure)[] = new Array(qs.length);
  for (let start = 0; start < qs.length;) {
    let end = start + 1;
    let bytes = encoded[start].length;
    while (end < qs.length && bytes + encoded[end].length <= BATCH_BYTES) bytes += encoded[end++].length;
    await resolveChunk(db, c, qs, encoded, start, end, out);
    start = end;
  }
  return out;
}

/** Most bytes of encoded resolutions in one statement. */
const BATCH_BYTES = 4 * 1024 * 1024;

/** Resolves `qs[start..end)` in one statement into `out`; if it fails as a whole, each item alone. */
async function resolveChunk(
  db: Db,
  c: CallbackSql,
  qs: ResolveRequest[],
  encoded: string[],
  start: number,
  end: number,
  out: (CallbackResolution | ItemFailure)[],
): Promise<void> {
  if (end - start > 1) {
    try {
      const rows = await db.query(`select * from ${c.resolveBatch}($1::text::json)`, [
        `[${encoded.slice(start, end).join(",")}]`,
      ]);
      for (const r of rows) out[Number(r.ord)] = rowToResolution(r);
      return;
    } catch {
      // a deadlock with another batch, or one item the database refuses: each alone below
    }
  }
  const alone = await Promise.allSettled(qs.slice(start, end).map((q) => resolveCallback(db, c, q)));
  alone.forEach((r, i) => out[start + i] = r.status === "fulfilled" ? r.value : new ItemFailure(r.reason));
}

/**
 * Counts a refused callback request (bad signature, bad body, too large) on the pending callback it names,
 * wherever it lives (SQL `record_callback_rejection`): whether a pending callback was found.
 */
export async function recordCallbackRejection(
  db: Db,
  schemaSql: string,
  callbackId: string,
  status: number,
  code: string,
): Promise<boolean> {
  const [r] = await db.query(`select ${schemaSql}.record_callback_rejection($1::uuid, $2, $3) as found`, [
    callbackId,
    status,
    code,
  ]);
  return Boolean(r?.found);
}

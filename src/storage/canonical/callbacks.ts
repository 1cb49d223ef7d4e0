/** Callbacks: registration for the running attempt, reading, and resolution (complete/resume/fail/heartbeat). */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { CallbackRecord, CallbackResolution } from "../engine.ts";

export async function registerCallback(
  db: Db,
  n: SchemaNames,
  id: number,
  lease: number,
  timeoutMs: number,
  kind: "in_process" | "http",
): Promise<string | null> {
  const rows = await db.query(`select ${n.q}.register_callback($1, $2, $3, $4) as id`, [
    id,
    lease,
    Math.max(1, Math.round(timeoutMs)),
    kind,
  ]);
  return rows[0].id ?? null;
}

function rowToCallback(r: Row): CallbackRecord {
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
  };
}

export async function getCallback(db: Db, n: SchemaNames, id: string): Promise<CallbackRecord | null> {
  const rows = await db.query(`select * from ${n.q}.callbacks where id = $1::uuid`, [id]);
  return rows.length ? rowToCallback(rows[0]) : null;
}

export async function listCallbacks(db: Db, n: SchemaNames, jobId: number): Promise<CallbackRecord[]> {
  const rows = await db.query(`select * from ${n.q}.callbacks where job_id = $1 order by created_at`, [jobId]);
  return rows.map(rowToCallback);
}

export async function resolveCallback(
  db: Db,
  n: SchemaNames,
  id: string,
  action: "complete" | "resume" | "fail" | "heartbeat",
  a: { payload?: unknown; error?: string; retryable?: boolean; timeoutSeconds?: number },
): Promise<CallbackResolution> {
  const rows = await db.query(
    `select * from ${n.q}.resolve_callback($1::uuid, $2, $3::text::jsonb, $4, $5, $6)`,
    [
      id,
      action,
      a.payload === undefined ? null : JSON.stringify(a.payload),
      a.error ?? null,
      a.retryable ?? null,
      a.timeoutSeconds ?? null,
    ],
  );
  const r = rows[0];
  return {
    outcome: r.outcome,
    jobId: r.job_id === null ? null : Number(r.job_id),
    state: r.state ?? null,
    timeoutAt: r.timeout_at ?? null,
  };
}

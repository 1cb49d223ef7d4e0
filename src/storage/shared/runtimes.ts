/**
 * The runtimes table (svc schema, shared by both engines): one row per worker process, heartbeated
 * with its queues, the engines it can execute, its readiness and its health report.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { RuntimeInfo } from "../../types.ts";
import type { RuntimeReport } from "../engine.ts";

export async function upsertRuntime(db: Db, n: SchemaNames, r: RuntimeReport): Promise<void> {
  await db.query(
    `insert into ${n.q}.runtimes (id, hostname, pid, queues, engines, ready, leader, health)
     values ($1, $2, $3, $4::text[], coalesce($5::text[], '{canonical}'), $6, $7, $8::text::jsonb)
     on conflict (id) do update set queues = excluded.queues, engines = excluded.engines, ready = excluded.ready,
        leader = excluded.leader, health = excluded.health, heartbeat_at = now()`,
    [r.id, r.hostname, r.pid, r.queues, r.engines ?? null, r.ready, r.leader, JSON.stringify(r.health)],
  );
}

export async function deleteRuntime(db: Db, n: SchemaNames, id: string): Promise<void> {
  await db.query(`delete from ${n.q}.runtimes where id = $1`, [id]);
}

/** Runtimes heartbeated within `liveWithinMs` (and older ones marked not live, for the UI). */
export async function listRuntimes(db: Db, n: SchemaNames, liveWithinMs: number): Promise<RuntimeInfo[]> {
  // The leader shown is the holder of the current term, and only while it is live: a runtime's own
  // `leader` column can be stale (a leader that stopped without a chance to say so).
  const rows = await db.query(
    `select r.*, r.heartbeat_at > now() - $1::bigint * interval '1 millisecond' as live,
            r.id = (select l.holder from ${n.q}.leadership l) as holder
       from ${n.q}.runtimes r order by r.started_at`,
    [liveWithinMs],
  );
  return rows.map((r) => ({
    id: r.id,
    hostname: r.hostname,
    pid: Number(r.pid),
    queues: r.queues,
    engines: r.engines ?? ["canonical"],
    ready: r.ready,
    leader: Boolean(r.holder && r.live),
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    live: r.live,
    rescueAfterMs: numberOrNull(r.health?.rescue_after_ms),
    inFlight: numberOrNull(r.health?.in_flight),
  }));
}

function numberOrNull(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** How long the row of a runtime that stopped heartbeating is kept (for the UI and the rescue). */
export const DEAD_RUNTIME_RETENTION_MS = 3_600_000;

/** Deletes the rows of runtimes dead for an hour; returns how many. */
export async function pruneRuntimes(db: Db, n: SchemaNames): Promise<number> {
  const rows = await db.query(
    `delete from ${n.q}.runtimes where heartbeat_at < now() - $1::bigint * interval '1 millisecond' returning id`,
    [DEAD_RUNTIME_RETENTION_MS],
  );
  return rows.length;
}

/**
 * The runtimes table (svc schema, shared by both engines): one row per worker process, heartbeated
 * with its queues, the engines it can execute, its readiness and its health report.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { RuntimeInfo, StuckHandlerInfo, ThrottledQueueInfo } from "../../types.ts";
import type { AbandonedAttemptReport, RuntimeReport } from "../engine.ts";

/**
 * Writes a runtime's row. A row that still says `leader` but whose runtime no longer holds the term (a
 * leader killed before it could say so) is set right by the next heartbeat of any runtime: `leader` is
 * true only on the current holder's row (and only while that runtime reports it). Normally no row matches,
 * so this costs no write.
 */
export async function upsertRuntime(db: Db, n: SchemaNames, r: RuntimeReport): Promise<void> {
  await db.query(
    `with up as (
       insert into ${n.q}.runtimes (id, hostname, pid, queues, engines, ready, leader, health)
       values ($1, $2, $3, $4::text[], coalesce($5::text[], '{canonical}'), $6, $7, $8::text::jsonb)
       on conflict (id) do update set queues = excluded.queues, engines = excluded.engines, ready = excluded.ready,
          leader = excluded.leader, health = excluded.health, heartbeat_at = now()
       returning id),
     former as (
       update ${n.q}.runtimes f set leader = false
        where f.leader and f.id <> $1 and f.id is distinct from (select l.holder from ${n.q}.leadership l)
       returning f.id)
     select (select count(*) from up) as up, (select count(*) from former) as former`,
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
    // A process that reports in_flight and no held holds none; an older one reports neither.
    held: numberOrNull(r.health?.held) ?? (numberOrNull(r.health?.in_flight) === null ? null : 0),
    heldJobs: Array.isArray(r.health?.held_jobs)
      ? r.health.held_jobs.filter((x: unknown) => Number.isSafeInteger(x))
      : [],
    stuckHandlers: stuckList(r.health?.stuck_handlers),
    throttled: throttledList(r.health?.throttled),
    kinds: Array.isArray(r.health?.kinds)
      ? r.health.kinds.filter((k: unknown) => typeof k === "string")
      : null,
  }));
}

/** The throttled queues a heartbeat named, the well-formed entries only. */
function throttledList(v: unknown): ThrottledQueueInfo[] {
  if (!Array.isArray(v)) return [];
  return v.filter((x) =>
    x && typeof x === "object" && typeof x.queue === "string" && typeof x.limit === "string" &&
    typeof x.since === "string"
  ).map((x) => ({ queue: x.queue, limit: x.limit, since: x.since }));
}

/** The stuck handlers a heartbeat named, the well-formed entries only. */
function stuckList(v: unknown): StuckHandlerInfo[] {
  if (!Array.isArray(v)) return [];
  return v.filter((x) =>
    x && typeof x === "object" && typeof x.job_id === "number" && typeof x.lease === "number" &&
    typeof x.kind === "string" && typeof x.queue === "string" && typeof x.reason === "string" &&
    typeof x.aborted_at === "string"
  ).map((x) => ({
    job_id: x.job_id,
    lease: x.lease,
    kind: x.kind,
    queue: x.queue,
    reason: x.reason,
    aborted_at: x.aborted_at,
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

/** The attempts runtimes name as given up on in their heartbeat (`health.abandoned`), at most 1,000. */
export async function abandonedAttempts(db: Db, n: SchemaNames): Promise<AbandonedAttemptReport[]> {
  const rows = await db.query(
    `select r.id as runtime_id, a.id, a.lease, a.reason
       from ${n.q}.runtimes r,
            jsonb_to_recordset(case when jsonb_typeof(r.health -> 'abandoned') = 'array'
                                    then r.health -> 'abandoned' else '[]' end) as a(id bigint, lease integer, reason text)
      where r.health ? 'abandoned' and a.id is not null and a.lease is not null
      limit 1000`,
  );
  return rows.map((r) => ({
    runtimeId: r.runtime_id,
    id: Number(r.id),
    lease: Number(r.lease),
    reason: r.reason ?? "",
  }));
}

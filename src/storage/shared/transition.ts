/**
 * The storage transition (canonical -> prepared -> mixed_transition -> active, docs/guide/upgrade.md):
 * the status report (read without locks) and the steps (`storage_step`, under the state row's lock with a
 * lock timeout, so that two operators racing get one winner and nobody waits forever).
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { SvcError } from "../../errors.ts";

/** `svc storage status --json` and GET /api/storage. */
export interface StorageStatus {
  /** `canonical`, `prepared`, `mixed_transition` or `active`. */
  state: string;
  /** Where new writes go. */
  engine: "canonical" | "queue_storage";
  prepared_engine: string | null;
  /** Unfinished jobs in the canonical table. */
  canonical_backlog: number;
  /** Every queue-storage object is installed. */
  queue_storage_ready: boolean;
  queue_storage_schema: string | null;
  /** Live runtimes by the engines they can execute. */
  runtimes: { canonical_only: number; queue_storage_capable: number };
  /** What keeps the next step from being taken (one line each). */
  blockers: string[];
  abort_possible: boolean;
  /** The command of the next step, or null when active. */
  next_step: string | null;
  /** The same as `state` (older readers of GET /api/storage). */
  transition: string;
}

/** A transition step. */
export type StorageCommand = "prepare" | "enter-mixed-transition" | "finalize" | "abort";

/** What a step did. */
export interface StepResult {
  outcome: "changed" | "noop" | "blocked";
  /** The state after the step. */
  state: string;
  message: string;
}

/** A step could not take the state row's lock in time; `pids` are the sessions holding it. */
export class StorageLockTimeoutError extends SvcError {
  constructor(readonly pids: number[], waitedMs: number) {
    super(
      `could not lock the storage state within ${waitedMs / 1000} s: ${
        pids.length ? `held by session(s) ${pids.join(", ")}` : "held by another session"
      } (another svc storage command, or a long producer transaction); try again`,
      "storage_locked",
    );
    this.name = "StorageLockTimeoutError";
  }
}

export async function storageStatus(db: Db, n: SchemaNames, liveWithinMs: number): Promise<StorageStatus> {
  const [r] = await db.query(`select ${n.q}.storage_status($1) as s`, [liveWithinMs]);
  return { ...r.s, canonical_backlog: Number(r.s.canonical_backlog), transition: r.s.state };
}

/** Runs one step under the state row's lock, waiting for it at most `lockTimeoutMs`. */
export async function storageStep(
  db: Db,
  n: SchemaNames,
  command: StorageCommand,
  liveWithinMs: number,
  lockTimeoutMs: number,
): Promise<StepResult> {
  try {
    return await db.begin(async (tx) => {
      await tx.query(`select set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
      const [r] = await tx.query(`select ${n.q}.storage_step($1, $2) as r`, [command, liveWithinMs]);
      return r.r as StepResult;
    });
  } catch (e) {
    if ((e as { code?: string }).code !== "55P03") throw e;
    const rows = await db.query(
      `select l.pid from pg_locks l
        where l.locktype = 'transactionid' and l.granted and l.mode = 'ExclusiveLock'
          and l.transactionid = (select xmax from ${n.q}.storage_state)
       union
       select a.pid from pg_stat_activity a
        where a.query ilike '%storage_step%' and a.pid <> pg_backend_pid() and a.state <> 'idle'`,
    );
    throw new StorageLockTimeoutError(rows.map((x) => Number(x.pid)), lockTimeoutMs);
  }
}

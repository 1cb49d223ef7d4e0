/** Completes many attempts in one statement, guarded by (id, run lease, running). */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import { type Completion, completionsJson } from "../engine.ts";

/**
 * The completion statement over the JSON array in `$1` (`[{id, lease, result}]`) and the same ids as
 * an array in `$2`, returning the completed ids; `deleteRows` deletes the rows instead
 * (`retention.completed === 0`).
 *
 * `j.id = any($2)` makes the rows' lookup one index probe per id: joined only on the JSON, the planner
 * reads every `running` entry of the state index and hashes them, and until vacuum that index holds
 * a dead `running` entry for every job that ever ran (bitmap scans never mark them dead), so each
 * completion got slower with every job processed.
 */
export function completionSql(n: SchemaNames, deleteRows: boolean): string {
  const input =
    `json_to_recordset($1::text::json) as u(id bigint, lease integer, started_at timestamptz, result json)`;
  const match = `j.id = any($2::bigint[]) and j.state = 'running' and j.id = u.id and j.lease = u.lease`;
  return deleteRows
    ? `delete from ${n.q}.jobs j using ${input} where ${match} returning j.id`
    : `update ${n.q}.jobs j
          set state = 'completed', result = u.result::jsonb, finalized_at = now(), heartbeat_at = null, deadline_at = null,
              attempted_at = coalesce(u.started_at, j.attempted_at, j.claimed_at)
         from ${input}
        where ${match} returning j.id`;
}

export async function completeJobs(
  db: Db,
  n: SchemaNames,
  items: Completion[],
  deleteRows: boolean,
): Promise<number[]> {
  if (items.length === 0) return [];
  const rows = await db.query(completionSql(n, deleteRows), [
    completionsJson(items),
    items.map((c) => c.id),
  ]);
  return rows.map((r) => Number(r.id));
}

/** Completes many attempts in one statement, guarded by (id, run lease, running). */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Completion } from "../engine.ts";

/**
 * The completion statement over the JSON array in parameter `param` (`[{id, lease, result}]`),
 * returning the completed ids; `deleteRows` deletes the rows instead (`retention.completed === 0`).
 */
function completionSql(n: SchemaNames, deleteRows: boolean, param: string): string {
  const input = `json_to_recordset(${param}::text::json) as u(id bigint, lease integer, result json)`;
  return deleteRows
    ? `delete from ${n.q}.jobs j using ${input}
        where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`
    : `update ${n.q}.jobs j
          set state = 'completed', result = u.result::jsonb, finalized_at = now(), heartbeat_at = null, deadline_at = null
         from ${input}
        where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`;
}

/** The JSON parameter of `completionSql`. */
function completionsJson(items: Completion[]): string {
  return JSON.stringify(
    items.map((c) => ({ id: c.id, lease: c.lease, result: c.result === undefined ? null : c.result })),
  );
}

export async function completeJobs(
  db: Db,
  n: SchemaNames,
  items: Completion[],
  deleteRows: boolean,
): Promise<number[]> {
  if (items.length === 0) return [];
  const rows = await db.query(completionSql(n, deleteRows, "$1"), [completionsJson(items)]);
  return rows.map((r) => Number(r.id));
}

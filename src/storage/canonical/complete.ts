/** Completes many attempts in one statement, guarded by (id, run lease, running). */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Completion } from "../engine.ts";

export async function completeJobs(
  db: Db,
  n: SchemaNames,
  items: Completion[],
  deleteRows: boolean,
): Promise<number[]> {
  if (items.length === 0) return [];
  const input = JSON.stringify(
    items.map((c) => ({ id: c.id, lease: c.lease, result: c.result === undefined ? null : c.result })),
  );
  const rows = deleteRows
    ? await db.query(
      `delete from ${n.q}.jobs j using jsonb_to_recordset($1::text::jsonb) as u(id bigint, lease integer, result jsonb)
        where j.id = u.id and j.lease = u.lease and j.state = 'running'
        returning j.id`,
      [input],
    )
    : await db.query(
      `update ${n.q}.jobs j
          set state = 'completed', result = u.result, finalized_at = now(), heartbeat_at = null, deadline_at = null
         from jsonb_to_recordset($1::text::jsonb) as u(id bigint, lease integer, result jsonb)
        where j.id = u.id and j.lease = u.lease and j.state = 'running'
        returning j.id`,
      [input],
    );
  return rows.map((r) => Number(r.id));
}

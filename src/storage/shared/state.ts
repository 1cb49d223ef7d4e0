/** The storage state row (svc schema): which engine takes writes, the transition, the queue-storage schema. */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { StorageState } from "../engine.ts";

export async function readStorageState(db: Db, n: SchemaNames): Promise<StorageState> {
  const [r] = await db.query(`select to_jsonb(s) as s from ${n.q}.storage_state s`);
  const s = r?.s ?? {};
  return {
    engine: s.engine ?? "canonical",
    transition: s.transition ?? "canonical",
    qsSchema: s.qs_schema ?? null,
  };
}

/** The schema version this binary expects, and how to read the database's. */
import type { Db } from "./connection.ts";
import type { SchemaNames } from "./names.ts";

/** The bundled migrations, in order; the last one's version is the expected schema version. */
export const MIGRATIONS: readonly { version: number; file: string }[] = [
  { version: 1, file: "0001_initial.sql" },
  { version: 2, file: "0002_cron.sql" },
  { version: 3, file: "0003_batched_callbacks.sql" },
  { version: 4, file: "0004_queue_storage.sql" },
  { version: 5, file: "0005_samples.sql" },
  { version: 6, file: "0006_enqueue.sql" },
  { version: 7, file: "0007_ring_slot_writes.sql" },
];

/** The schema version this binary needs (workers run on any schema at or above it). */
export const EXPECTED_SCHEMA_VERSION: number = MIGRATIONS[MIGRATIONS.length - 1].version;

/** The database's schema version, or null when svc was never migrated there. */
export async function readSchemaVersion(db: Db, names: SchemaNames): Promise<number | null> {
  const rows = await db.query(
    `select to_regclass($1) is not null as present`,
    [`${names.q}.schema_migrations`],
  );
  if (!rows[0].present) return null;
  const v = await db.query(`select max(version) as v from ${names.q}.schema_migrations`);
  return v[0].v === null ? null : Number(v[0].v);
}

/** Whether this binary runs on a database at `version` (null: never migrated): at or above the expected one. */
export function schemaCompatible(version: number | null): version is number {
  return version !== null && version >= EXPECTED_SCHEMA_VERSION;
}

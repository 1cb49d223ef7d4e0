/**
 * Forward-only migrations: `migrations/NNNN_name.sql`, one schema version each, applied in one
 * transaction under a transaction-scoped advisory lock so concurrent migrations are safe.
 */
import type { Db } from "./connection.ts";
import type { SchemaNames } from "./names.ts";
import { readText } from "../runtime/runtime.ts";
import { EXPECTED_SCHEMA_VERSION, MIGRATIONS } from "./schema_version.ts";
import { readSchemaVersion } from "./schema_version.ts";

/** Raised when the database's schema is newer than this binary knows. */
export class SchemaTooNewError extends Error {
  constructor(current: number, expected: number) {
    super(
      `database schema version ${current} is newer than this svc (expects ${expected}); ` +
        `upgrade svc before running migrate (workers of this version still run against it)`,
    );
    this.name = "SchemaTooNewError";
  }
}

/** The outcome of `migrate`. */
export interface MigrateResult {
  from: number;
  to: number;
  applied: number[];
}

/** Applies every missing migration. Idempotent. */
export async function migrate(db: Db, names: SchemaNames): Promise<MigrateResult> {
  const texts = await Promise.all(
    MIGRATIONS.map((m) => readText(new URL(`../../migrations/${m.file}`, import.meta.url))),
  );
  return await db.begin(async (tx) => {
    await tx.query("select pg_advisory_xact_lock($1::bigint)", [names.migrateLockKey]);
    await tx.query(`create schema if not exists ${names.q}`);
    await tx.query(
      `create table if not exists ${names.q}.schema_migrations (
         version integer primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    const from = (await readSchemaVersion(tx, names)) ?? 0;
    if (from > EXPECTED_SCHEMA_VERSION) throw new SchemaTooNewError(from, EXPECTED_SCHEMA_VERSION);
    const applied: number[] = [];
    await tx.query(`select set_config('search_path', $1, true)`, [`${names.q}, pg_catalog`]);
    for (let i = 0; i < MIGRATIONS.length; i++) {
      const m = MIGRATIONS[i];
      if (m.version <= from) continue;
      await tx.exec(texts[i]);
      await tx.query(`insert into ${names.q}.schema_migrations (version, name) values ($1, $2)`, [
        m.version,
        m.file,
      ]);
      applied.push(m.version);
    }
    return { from, to: Math.max(from, EXPECTED_SCHEMA_VERSION), applied };
  });
}

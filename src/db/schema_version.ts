/** The schema version this binary expects, and how to read the database's. */
import type { Db } from "./connection.ts";
import type { SchemaNames } from "./names.ts";

/**
 * The baseline: the whole schema of a new database in one migration (version 10). Nothing of the older
 * line was released, so its migrations 1 to 9 were squashed into it (ADR 017).
 */
export const BASELINE: { version: number; file: string } = { version: 10, file: "0010_baseline.sql" };

/**
 * How a database below the baseline reaches it: version 7 (the older line, canonical) through the DDL
 * that versions 8 and 9 added; version 8 (a development state) through the DDL of 9 (`attempt_progress`);
 * version 9 had the baseline's tables but for `claimed_at`. Each adds `claimed_at` where it is missing.
 * Versions 1 to 6 were never released as a line of their own: `svc migrate` refuses them.
 */
export const BASELINE_UPGRADES: Readonly<Record<number, string | null>> = {
  7: "0010_baseline_from_v7.sql",
  8: "0010_baseline_from_v8.sql",
  9: "0010_baseline_from_v9.sql",
};

/** The migrations after the baseline, in order (forward-only from the first release on). */
export const MIGRATIONS: readonly { version: number; file: string }[] = [
  BASELINE,
  // The ring's position in a sequence, read without a snapshot by producers (ADR 016).
  { version: 11, file: "0011_ring_position.sql" },
  // The completion arrays compressed with lz4 where the server has it (ADR 016).
  { version: 12, file: "0012_completion_compression.sql" },
  // A job's limit key on canonical's jobs and on queue storage's job tables, and parked.waiter (ADR 019).
  { version: 13, file: "0013_limit_key.sql" },
  // Fleet-wide limits per queue: queue_limits, queues.limited and the rate limit's log (ADR 019).
  { version: 14, file: "0014_queue_limits.sql" },
  // Concurrency limits on queue storage: the log of a limited queue's open attempts (ADR 019).
  { version: 15, file: "0015_concurrency_log.sql" },
  // Per-key limits: the keyed jobs of a queue moved aside, by due time (ADR 019).
  { version: 16, file: "0016_diverted_index.sql" },
  // Outcomes of a lost claim change nothing: the claim ids' epoch, parked attempts' claim ids (ADR 021).
  { version: 17, file: "0017_claim_epoch.sql" },
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

/** Why the database cannot take writes: read-only by default, a standby, or null when it can. */
export async function readOnlyReason(db: Db): Promise<"read_only" | "standby" | null> {
  const [ro] = await db.query("show default_transaction_read_only");
  if (String(ro.default_transaction_read_only).toLowerCase() === "on") return "read_only";
  const [rec] = await db.query("select pg_is_in_recovery() as standby");
  return rec.standby ? "standby" : null;
}

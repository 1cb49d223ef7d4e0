/**
 * `svc migrate`, in one transaction under a transaction-scoped advisory lock so concurrent migrations are
 * safe:
 *
 * 1. the DDL: forward-only migrations `migrations/NNNN_name.sql`, one schema version each, from the
 *    baseline (version 10) on; a database of the older line (version 7) or at a development state 8 or 9
 *    reaches the baseline first (`BASELINE_UPGRADES`);
 * 2. the logic: every function, view and trigger of `sql/*.sql`, applied in file-name order with
 *    `create or replace` after the functions and views the previous migrate installed were dropped (so
 *    that a function whose signature or result changed is dropped and created in the same
 *    transaction). Skipped when nothing changed (same library version, same files).
 *
 * The library's version is recorded with the functions (`sql_version`); a library never overwrites the
 * functions of a newer one (`SqlTooNewError`), and a worker never starts on them (ADR 017).
 *
 * Migration files are templates: `{{qs}}` (the queue-storage schema as a quoted identifier),
 * `{{qs_name}}` (the same as a string literal), `{{slots}}`, `{{rotation_ms}}` and `{{shards}}` (its
 * sizing) are replaced before a file runs. The files of `sql/` are plain SQL that psql reads: they run
 * with search_path set to the svc schema, and name the queue-storage schema by its default name
 * `svc_qs`, which `renderSqlFile` replaces by the installed one. The values are the ones recorded in the
 * storage state when the queue-storage objects were installed, or the options of the first migration
 * that installs them (docs/reference/storage.md).
 */
import type { Db } from "./connection.ts";
import { type SchemaNames, validateSchemaName } from "./names.ts";
import { MIGRATION_SQL, SQL_FILES } from "../generated/migrations.ts";
import {
  BASELINE,
  BASELINE_UPGRADES,
  EXPECTED_SCHEMA_VERSION,
  MIGRATIONS,
  readSchemaVersion,
} from "./schema_version.ts";
import { compareVersions, LIBRARY_VERSION } from "../version.ts";
import { SvcError, ValidationError } from "../errors.ts";

/** Raised when the database's schema is newer than this binary knows. */
export class SchemaTooNewError extends SvcError {
  constructor(current: number, expected: number) {
    super(
      `database schema version ${current} is newer than this svc (expects ${expected}); ` +
        `upgrade svc before running migrate (workers of this version still run against it)`,
      "schema_too_new",
    );
    this.name = "SchemaTooNewError";
  }
}

/** Raised when the database's schema is older than the oldest version this binary upgrades from. */
export class SchemaTooOldError extends SvcError {
  constructor(current: number) {
    super(
      `database schema version ${current} is a development state of the older line that this svc does not ` +
        `upgrade (it upgrades from version 7, 8 or 9): migrate it with the svc of that state to version 7 first, ` +
        "or start from an empty schema",
      "schema_too_old",
    );
    this.name = "SchemaTooOldError";
  }
}

/**
 * Raised when the database's functions were installed by a newer library than this one: its migrate
 * would overwrite them with older ones, and its workers would run SQL newer than themselves.
 */
export class SqlTooNewError extends SvcError {
  constructor(installed: string, own: string) {
    super(
      `the svc functions in this database were installed by svc ${installed}, newer than this svc ${own}; ` +
        `an older svc neither replaces them nor runs workers on them: upgrade this svc to ${installed} or later`,
      "sql_too_new",
    );
    this.name = "SqlTooNewError";
  }
}

/** Raised when `engine` asks for another engine than the database already runs. */
export class EngineMismatchError extends ValidationError {
  constructor(current: string, asked: string) {
    super(
      `this database runs the ${current} storage engine; --engine ${asked} applies only to a new database. ` +
        "To move an existing database to queue storage, use `svc storage prepare` (docs/guide/upgrade.md)",
    );
    this.name = "EngineMismatchError";
  }
}

/** Raised when a queue-storage parameter differs from the one the database was installed with. */
export class QsParamsMismatchError extends ValidationError {
  constructor(message: string) {
    super(message);
    this.name = "QsParamsMismatchError";
  }
}

/** The storage engines. */
export type EngineName = "canonical" | "queue_storage";

/** Options of `migrate`. */
export interface MigrateOptions {
  /**
   * The engine of a new database (schema version 0): `queue_storage` (default) or `canonical` (the
   * older release line). On an installed database it must match the engine it runs, or be absent.
   */
  engine?: EngineName;
  /** Queue-storage schema (default `<schema>_qs`), recorded when its objects are first installed. */
  qsSchema?: string;
  /** Ring slots (default 8). */
  qsSlots?: number;
  /** How often the leader rotates the ring, in ms (default 30 000). */
  qsRotationIntervalMs?: number;
  /** Producer shards per lane (default 4). */
  qsShards?: number;
}

/** The outcome of `migrate`. */
export interface MigrateResult {
  from: number;
  to: number;
  applied: number[];
  /** The engine the database runs after migrating. */
  engine: EngineName;
}

/** Defaults of the queue-storage sizing. */
export const QS_DEFAULTS = { slots: 8, rotationIntervalMs: 30_000, shards: 4 } as const;

/** The queue-storage parameters a migration file is rendered with. */
export interface QsParams {
  schema: string;
  slots: number;
  rotationMs: number;
  shards: number;
}

function checkInt(name: string, v: number | undefined, min: number, max: number): void {
  if (v !== undefined && (!Number.isInteger(v) || v < min || v > max)) {
    throw new ValidationError(`${name} must be an integer from ${min} to ${max}, got ${v}`);
  }
}

/** Validates the queue-storage options (names and ranges). */
export function validateMigrateOptions(o: MigrateOptions): void {
  if (o.engine !== undefined && o.engine !== "canonical" && o.engine !== "queue_storage") {
    throw new ValidationError(`engine must be canonical or queue_storage, got ${JSON.stringify(o.engine)}`);
  }
  if (o.qsSchema !== undefined) validateSchemaName(o.qsSchema);
  checkInt("qsSlots", o.qsSlots, 3, 64);
  checkInt("qsRotationIntervalMs", o.qsRotationIntervalMs, 1_000, 86_400_000);
  checkInt("qsShards", o.qsShards, 1, 64);
}

/** Renders the template parameters of a migration file (see the module's doc). */
export function renderMigration(text: string, p: QsParams): string {
  return text
    .replaceAll("{{qs}}", `"${p.schema}"`)
    .replaceAll("{{qs_name}}", `'${p.schema}'`)
    .replaceAll("{{slots}}", String(p.slots))
    .replaceAll("{{rotation_ms}}", String(p.rotationMs))
    .replaceAll("{{shards}}", String(p.shards));
}

/**
 * Renders a file of `sql/`: the default queue-storage schema name `svc_qs` (as an identifier or inside a
 * literal, always a whole word) becomes the installed one. Schema names are validated lower-case
 * identifiers (`validateSchemaName`), so the name needs no quoting in either place.
 */
export function renderSqlFile(text: string, qsSchema: string): string {
  validateSchemaName(qsSchema);
  return text.replace(/\bsvc_qs\b/g, qsSchema);
}

/** The files of `sql/` in the order `svc migrate` applies them (by name), from the generated module. */
export function sqlFiles(): { name: string; text: string }[] {
  return Object.keys(SQL_FILES).sort().map((name) => ({ name, text: SQL_FILES[name] }));
}

/** A digest of the files of `sql/` (hex SHA-256), recorded with the library version. */
export async function sqlDigest(): Promise<string> {
  const parts = sqlFiles().map((f) => `${f.name}\n${f.text}`).join("\u0000");
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** What `svc migrate` recorded about the functions it installed, or null before any were recorded. */
export interface SqlVersion {
  /** The library version that installed them. */
  library: string;
  /** The digest of its `sql/` files. */
  digest: string;
}

/** Reads the recorded library version of the installed functions (null: none recorded). */
export async function readSqlVersion(db: Db, names: SchemaNames): Promise<SqlVersion | null> {
  const [t] = await db.query(`select to_regclass($1) is not null as present`, [`${names.q}.sql_version`]);
  if (!t.present) return null;
  const [r] = await db.query(`select library_version, sql_digest from ${names.q}.sql_version`);
  return r ? { library: String(r.library_version), digest: String(r.sql_digest) } : null;
}

/** Throws `SqlTooNewError` when a newer library than this one installed the database's functions. */
export async function assertSqlNotNewer(db: Db, names: SchemaNames): Promise<void> {
  const v = await readSqlVersion(db, names);
  if (v && compareVersions(v.library, LIBRARY_VERSION) > 0) {
    throw new SqlTooNewError(v.library, LIBRARY_VERSION);
  }
}

/** The recorded queue-storage parameters, or null before they exist (schema version < 4). */
export async function readQsParams(db: Db, names: SchemaNames): Promise<QsParams | null> {
  const cols = await db.query(
    `select 1 from information_schema.columns
      where table_schema = $1 and table_name = 'storage_state' and column_name = 'qs_schema'`,
    [names.schema],
  );
  if (cols.length === 0) return null;
  const [r] = await db.query(
    `select qs_schema, qs_slots, qs_rotation_ms, qs_shards from ${names.q}.storage_state`,
  );
  if (!r?.qs_schema) return null;
  return {
    schema: r.qs_schema,
    slots: Number(r.qs_slots),
    rotationMs: Number(r.qs_rotation_ms),
    shards: Number(r.qs_shards),
  };
}

/**
 * The template of a migration file, from the generated module that holds `migrations/*.sql` (so that
 * a published package or a compiled binary, which have no files beside the sources, migrate alike).
 */
export function migrationText(file: string): string {
  const text = MIGRATION_SQL[file];
  if (text === undefined) {
    throw new SvcError(
      `the migration ${file} is not in src/generated/migrations.ts: run \`deno task assets\` and commit the result`,
      "internal",
    );
  }
  return text;
}

/** The migration files to run from schema version `from` (0: a new schema), in order. */
function pendingMigrations(from: number): { version: number; file: string | null }[] {
  if (from >= BASELINE.version) return MIGRATIONS.filter((m) => m.version > from);
  let first: { version: number; file: string | null };
  if (from === 0) first = BASELINE;
  else if (from in BASELINE_UPGRADES) first = { version: BASELINE.version, file: BASELINE_UPGRADES[from] };
  else throw new SchemaTooOldError(from);
  return [first, ...MIGRATIONS.filter((m) => m.version > BASELINE.version)];
}

/** Applies every missing migration, then the functions of `sql/` when they changed. Idempotent. */
export async function migrate(db: Db, names: SchemaNames, opts: MigrateOptions = {}): Promise<MigrateResult> {
  validateMigrateOptions(opts);
  const digest = await sqlDigest();
  return await db.begin(async (tx) => {
    await tx.query("select pg_advisory_xact_lock($1::bigint)", [names.migrateLockKey]);
    await tx.query(`create schema if not exists ${names.q}`);
    await tx.query(
      `create table if not exists ${names.q}.schema_migrations (
         version integer primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    // Which library installed the functions, from which files, and what it installed (dropped by the next
    // migrate that installs others).
    await tx.query(
      `create table if not exists ${names.q}.sql_version (
         singleton boolean primary key default true check (singleton),
         library_version text not null, sql_digest text not null, installed text[] not null,
         applied_at timestamptz not null default now())`,
    );
    const from = (await readSchemaVersion(tx, names)) ?? 0;
    if (from > EXPECTED_SCHEMA_VERSION) throw new SchemaTooNewError(from, EXPECTED_SCHEMA_VERSION);
    const recorded = await readSqlVersion(tx, names);
    if (recorded && compareVersions(recorded.library, LIBRARY_VERSION) > 0) {
      throw new SqlTooNewError(recorded.library, LIBRARY_VERSION);
    }
    const pending = pendingMigrations(from);
    if (from > 0 && opts.engine !== undefined) {
      const [st] = await tx.query(`select engine from ${names.q}.storage_state`);
      const current = (st?.engine ?? "canonical") as EngineName;
      if (current !== opts.engine) throw new EngineMismatchError(current, opts.engine);
    }
    const installed = await readQsParams(tx, names);
    if (installed) {
      // The ring's shape is fixed when queue storage is first installed; asking for another one is an error,
      // not something to ignore silently.
      const asked: [string, unknown, unknown][] = [
        ["--qs-schema", opts.qsSchema, installed.schema],
        ["--qs-slots", opts.qsSlots, installed.slots],
        ["--qs-rotation-interval", opts.qsRotationIntervalMs, installed.rotationMs],
        ["qsShards", opts.qsShards, installed.shards],
      ];
      for (const [name, want, have] of asked) {
        if (want !== undefined && want !== have) {
          const show = (v: unknown) =>
            name === "--qs-rotation-interval" ? `${Number(v) / 1000} s` : String(v);
          throw new QsParamsMismatchError(
            `${name} ${show(want)} differs from the installed ${
              show(have)
            }; queue-storage parameters are fixed when first installed`,
          );
        }
      }
    }
    const qs: QsParams = installed ?? {
      schema: opts.qsSchema ?? `${names.schema}_qs`,
      slots: opts.qsSlots ?? QS_DEFAULTS.slots,
      rotationMs: opts.qsRotationIntervalMs ?? QS_DEFAULTS.rotationIntervalMs,
      shards: opts.qsShards ?? QS_DEFAULTS.shards,
    };
    validateSchemaName(qs.schema);
    if (qs.schema === names.schema) {
      throw new ValidationError("the queue-storage schema must differ from the svc schema");
    }
    const upToDate = pending.length === 0 && recorded !== null && recorded.library === LIBRARY_VERSION &&
      recorded.digest === digest;
    const applied: number[] = [];
    if (!upToDate) {
      await tx.query(`select set_config('search_path', $1, true)`, [`${names.q}, pg_catalog`]);
      await dropInstalledSql(tx, names, qs.schema, from);
      for (const m of pending) {
        if (m.file !== null) await tx.exec(renderMigration(migrationText(m.file), qs));
        await tx.query(`insert into ${names.q}.schema_migrations (version, name) values ($1, $2)`, [
          m.version,
          m.file ?? `${BASELINE.file} (from ${from})`,
        ]);
        applied.push(m.version);
      }
      for (const f of sqlFiles()) await tx.exec(renderSqlFile(f.text, qs.schema));
      if (applied.length > 0) await tx.query(`select ensure_sample_partitions(7)`);
      await tx.query(
        `insert into ${names.q}.sql_version as v (library_version, sql_digest, installed)
         values ($1, $2, $3)
         on conflict (singleton) do update
           set library_version = excluded.library_version, sql_digest = excluded.sql_digest,
               installed = excluded.installed, applied_at = now()`,
        [LIBRARY_VERSION, digest, await installedSql(tx, names, qs.schema)],
      );
    }
    // The engine is chosen once, when the schema starts from version 0.
    if (from === 0 && (opts.engine ?? "queue_storage") === "queue_storage") {
      await tx.query(
        `update ${names.q}.storage_state set engine = 'queue_storage', transition = 'active', updated_at = now()`,
      );
    }
    const [st] = await tx.query(`select engine from ${names.q}.storage_state`);
    return {
      from,
      to: Math.max(from, EXPECTED_SCHEMA_VERSION),
      applied,
      engine: (st?.engine ?? "canonical") as EngineName,
    };
  });
}

/**
 * The functions, views and triggers of `sql/` as installed now: every function and view of the
 * queue-storage schema (it holds nothing else of them), and those of the svc schema whose names the
 * files create (identities such as `"svc".enqueue(text, jsonb, jsonb)`, views as `view "svc".name`,
 * triggers as `trigger name on "svc".table`).
 */
async function installedSql(tx: Db, names: SchemaNames, qsSchema: string): Promise<string[]> {
  const own = sqlObjectNames();
  const rows = await tx.query(
    `select format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)) as o
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = $2 or (n.nspname = $1 and p.proname = any($3::text[]))
     union all
     select format('view %I.%I', n.nspname, c.relname)
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'v' and (n.nspname = $2 or (n.nspname = $1 and c.relname = any($4::text[])))
     union all
     select format('trigger %I on %I.%I', t.tgname, n.nspname, c.relname)
       from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
      where not t.tgisinternal and n.nspname in ($1, $2) and t.tgname = any($5::text[])
     order by 1`,
    [names.schema, qsSchema, own.functions, own.views, own.triggers],
  );
  return rows.map((r) => String(r.o));
}

/**
 * Drops what the previous migrate installed (recorded in `sql_version`; for a database migrated before
 * the record existed, what `installedSql` finds), triggers first, then views and functions each in one
 * statement so that their dependencies on one another do not matter. An object of the user's that
 * depends on one of them makes the migrate fail, naming it, rather than disappear.
 */
async function dropInstalledSql(tx: Db, names: SchemaNames, qsSchema: string, from: number): Promise<void> {
  if (from === 0) return;
  const [r] = await tx.query(`select installed from ${names.q}.sql_version`);
  const objects: string[] = r ? r.installed : await installedSql(tx, names, qsSchema);
  const triggers = objects.filter((o) => o.startsWith("trigger "));
  const views = objects.filter((o) => o.startsWith("view ")).map((o) => o.slice(5));
  const functions = objects.filter((o) => !o.startsWith("trigger ") && !o.startsWith("view "));
  for (const t of triggers) await tx.query(`drop ${t.replace(/^trigger /, "trigger if exists ")}`);
  if (views.length > 0) await tx.query(`drop view if exists ${views.join(", ")}`);
  if (functions.length > 0) await tx.query(`drop function if exists ${functions.join(", ")}`);
}

/** The names of the functions, views and triggers the files of `sql/` create (in the svc schema or not). */
export function sqlObjectNames(): { functions: string[]; views: string[]; triggers: string[] } {
  const functions = new Set<string>(), views = new Set<string>(), triggers = new Set<string>();
  for (const f of sqlFiles()) {
    for (
      const m of f.text.matchAll(/create or replace (function|view|trigger)\s+(?:svc_qs\.)?([a-z_0-9]+)/g)
    ) {
      (m[1] === "function" ? functions : m[1] === "view" ? views : triggers).add(m[2]);
    }
  }
  return { functions: [...functions].sort(), views: [...views].sort(), triggers: [...triggers].sort() };
}

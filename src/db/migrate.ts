/**
 * Forward-only migrations: `migrations/NNNN_name.sql`, one schema version each, applied in one
 * transaction under a transaction-scoped advisory lock so concurrent migrations are safe.
 *
 * Migration files are templates: `{{qs}}` (the queue-storage schema as a quoted identifier),
 * `{{qs_name}}` (the same as a string literal), `{{slots}}`, `{{rotation_ms}}` and `{{shards}}` (its
 * sizing), and the `{{#each_shard}}` block (see `renderMigration`) are replaced before a file runs. The values are the ones recorded in the storage state when
 * the queue-storage objects were installed, or the options of the first migration that installs them
 * (docs/reference/storage.md).
 */
import type { Db } from "./connection.ts";
import { type SchemaNames, validateSchemaName } from "./names.ts";
import { MIGRATION_SQL } from "../generated/migrations.ts";
import { EXPECTED_SCHEMA_VERSION, MIGRATIONS, readSchemaVersion } from "./schema_version.ts";
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

/**
 * Renders the template parameters of a migration file. A block `{{#each_shard}}...{{/each_shard}}` is
 * repeated once per lane shard, `{{shard}}` inside it numbering them, the copies joined by `union all`
 * (a statement over every shard of a lane that the planner can merge in order). `{{slot_params v}}`
 * lists the elements of the array variable `v`, one per ring slot, for `slot in (...)`: the form a
 * generic plan prunes partitions by before it starts (an `= any(v)` is not pruned).
 */
export function renderMigration(text: string, p: QsParams): string {
  return text
    .replace(
      /\{\{#each_shard\}\}([\s\S]*?)\{\{\/each_shard\}\}/g,
      (_m, body: string) =>
        Array.from({ length: p.shards }, (_, i) => body.replaceAll("{{shard}}", String(i))).join(
          "\n      union all\n",
        ),
    )
    .replace(
      /\{\{slot_params ([a-z_]+)\}\}/g,
      (_m, v: string) => Array.from({ length: p.slots }, (_, i) => `(${v})[${i + 1}]`).join(", "),
    )
    .replaceAll("{{qs}}", `"${p.schema}"`)
    .replaceAll("{{qs_name}}", `'${p.schema}'`)
    .replaceAll("{{slots}}", String(p.slots))
    .replaceAll("{{rotation_ms}}", String(p.rotationMs))
    .replaceAll("{{shards}}", String(p.shards));
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

/** Applies every missing migration. Idempotent. */
export async function migrate(db: Db, names: SchemaNames, opts: MigrateOptions = {}): Promise<MigrateResult> {
  validateMigrateOptions(opts);
  const texts = MIGRATIONS.map((m) => migrationText(m.file));
  return await db.begin(async (tx) => {
    await tx.query("select pg_advisory_xact_lock($1::bigint)", [names.migrateLockKey]);
    await tx.query(`create schema if not exists ${names.q}`);
    await tx.query(
      `create table if not exists ${names.q}.schema_migrations (
         version integer primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    const from = (await readSchemaVersion(tx, names)) ?? 0;
    if (from > EXPECTED_SCHEMA_VERSION) throw new SchemaTooNewError(from, EXPECTED_SCHEMA_VERSION);
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
    const applied: number[] = [];
    await tx.query(`select set_config('search_path', $1, true)`, [`${names.q}, pg_catalog`]);
    for (let i = 0; i < MIGRATIONS.length; i++) {
      const m = MIGRATIONS[i];
      if (m.version <= from) continue;
      await tx.exec(renderMigration(texts[i], qs));
      await tx.query(`insert into ${names.q}.schema_migrations (version, name) values ($1, $2)`, [
        m.version,
        m.file,
      ]);
      applied.push(m.version);
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

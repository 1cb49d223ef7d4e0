import { ValidationError } from "../errors.ts";

/**
 * Names derived from the `schema` option: the quoted schema, NOTIFY channels and advisory-lock keys,
 * so that two schemas in one database never interfere.
 */

/** The default Postgres schema. */
export const DEFAULT_SCHEMA = "svc";

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,50}$/;

/** Names for one schema. */
export interface SchemaNames {
  schema: string;
  /** The schema as a quoted identifier. */
  q: string;
  /** NOTIFY channel with the queue name as payload when jobs become available. */
  jobsChannel: string;
  /**
   * NOTIFY channel with a job id as payload when its running attempt must stop: the job was cancelled, or
   * the leader rescued the attempt. Named `<schema>_cancel` (the name predates rescues; processes of
   * older releases listen on it).
   */
  abortChannel: string;
  /** NOTIFY channel with a callback id as payload when a callback is resolved or expires. */
  callbacksChannel: string;
  /** NOTIFY channel with the new transition state as payload when the storage state changes. */
  storageChannel: string;
  /** Advisory-lock key of migrations (transaction level). */
  migrateLockKey: number;
}

/** Throws a ValidationError unless `schema` is a valid schema name (1 to 51 of a-z 0-9 _, not a digit first). */
export function validateSchemaName(schema: string): string {
  if (typeof schema !== "string" || !SCHEMA_RE.test(schema)) {
    throw new ValidationError(
      `invalid schema name ${JSON.stringify(schema)}: ` +
        "use 1 to 51 characters of a-z 0-9 _ starting with a letter or _",
    );
  }
  return schema;
}

/** Validates a schema name and derives its names. */
export function schemaNames(schema: string = DEFAULT_SCHEMA): SchemaNames {
  validateSchemaName(schema);
  return {
    schema,
    q: `"${schema}"`,
    jobsChannel: `${schema}_jobs`,
    abortChannel: `${schema}_cancel`,
    callbacksChannel: `${schema}_callbacks`,
    storageChannel: `${schema}_storage`,
    migrateLockKey: lockKey(`svc:migrate:${schema}`),
  };
}

/** Names of the queue-storage schema (recorded in the storage state). */
export interface QsNames {
  schema: string;
  /** The schema as a quoted identifier. */
  q: string;
}

/** Names of a queue-storage schema. */
export function qsNames(schema: string): QsNames {
  validateSchemaName(schema);
  return { schema, q: `"${schema}"` };
}

/** A stable 52-bit key from a string (FNV-1a 64 folded), exact as a JS number and as a Postgres bigint. */
function lockKey(s: string): number {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(s)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h & 0xfffffffffffffn);
}

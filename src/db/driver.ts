/**
 * The driver: everything the client and the worker need from a database besides storage SQL. `Db` for
 * the SQL, LISTEN and close. The driver here is postgres.js over a pool; the seam lets
 * a driver of your own stand in (`createClient({ driver })`).
 */
import { type Db, fromPostgres, type Sql } from "./connection.ts";
import { SvcError } from "../errors.ts";
import type { PoolerMode } from "./pooler.ts";

/** A leader's duty ran after this process lost leadership; it wrote nothing. */
export class NotLeaderError extends SvcError {
  constructor(message = "this process no longer holds the leader's term") {
    super(message, "not_leader");
    this.name = "NotLeaderError";
  }
}

/** A database connection for the client and the worker. */
export interface Driver {
  /** `postgres` for the postgres.js pool; a driver of your own names itself. */
  readonly name: string;
  /** Storage SQL. */
  readonly db: Db;
  /** The postgres.js pool (postgres driver only). */
  readonly sql?: Sql;
  /**
   * `transaction` when the connection goes through a transaction pooler (no session state is relied on,
   * and the worker does not LISTEN through it); absent: `none`.
   */
  readonly pooler?: PoolerMode;
  /** Runs `fn` in a transaction; `raw` is the driver's own transaction handle (postgres.js `tx`). */
  transaction<T>(fn: (tx: Db, raw: unknown) => Promise<T>): Promise<T>;
  /** A `Db` for a transaction handle the caller passed as `tx` (a postgres.js transaction, or a `Db`). */
  txDb(tx: unknown): Db;
  /** LISTEN on a channel; resolves to a function that stops listening. */
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** Whether `x` already is a `Db`. */
export function isDb(x: unknown): x is Db {
  const d = x as Db;
  return typeof d?.query === "function" && typeof d?.exec === "function" && typeof d?.begin === "function";
}

/** The postgres.js driver over a pool; `close` ends the pool only when `owned`. */
export function postgresDriver(sql: Sql, opts: { owned?: boolean; pooler?: PoolerMode } = {}): Driver {
  return {
    name: "postgres",
    pooler: opts.pooler ?? "none",
    db: fromPostgres(sql),
    sql,
    transaction: (fn) => sql.begin((tx) => fn(fromPostgres(tx), tx)) as Promise<never>,
    txDb: (tx) => (isDb(tx) ? tx : fromPostgres(tx)),
    async listen(channel, fn) {
      const r = await sql.listen(channel, fn);
      return () => r.unlisten();
    },
    async close() {
      if (opts.owned) await sql.end({ timeout: 5 });
    },
  };
}

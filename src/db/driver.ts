/**
 * The driver: everything the client and the worker need from a database besides storage SQL. `Db` for
 * the SQL, LISTEN, the leader lock and close. The driver here is postgres.js over a pool; the seam lets
 * a driver of your own stand in (`createClient({ driver })`).
 */
import postgres from "../vendor/postgres/index.js";
import { type Db, fromPostgres, type Sql } from "./connection.ts";
import { SvcError } from "../errors.ts";

/** The leader's lock: held by at most one process per database and schema. */
export interface LeaderLock {
  /** Tries to take the lock; true when this process now holds it. */
  tryAcquire(): Promise<boolean>;
  /** Whether the lock is still held (false or a throw: leadership is lost). */
  check(): Promise<boolean>;
  /** Gives the lock back. */
  release(): Promise<void>;
  /** Forgets the connection behind the lock (after a failure; the lock goes with it). */
  drop(): void;
  /**
   * The leader's duties run through this `Db`: each statement (or `begin` block) in a transaction of its
   * own on the lock's session, which first checks that this session still holds the lock and that
   * `fence` (a statement returning one row with a true `ok`) holds; else it throws `NotLeaderError` and
   * writes nothing. A challenger takes over only by ending that session, which also rolls back whatever
   * the former leader had not committed, so a leader that was stopped and resumes changes nothing.
   */
  fencedDb(fence: () => { text: string; params: unknown[] }): Db;
}

/** A leader's duty ran after this process lost leadership; it wrote nothing. */
export class NotLeaderError extends SvcError {
  constructor(message = "this process no longer holds the leader lock") {
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
  /** Runs `fn` in a transaction; `raw` is the driver's own transaction handle (postgres.js `tx`). */
  transaction<T>(fn: (tx: Db, raw: unknown) => Promise<T>): Promise<T>;
  /** A `Db` for a transaction handle the caller passed as `tx` (a postgres.js transaction, or a `Db`). */
  txDb(tx: unknown): Db;
  /** LISTEN on a channel; resolves to a function that stops listening. */
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  /** The leader lock of one key. */
  leaderLock(key: number): LeaderLock;
  close(): Promise<void>;
}

/** Whether `x` already is a `Db`. */
export function isDb(x: unknown): x is Db {
  const d = x as Db;
  return typeof d?.query === "function" && typeof d?.exec === "function" && typeof d?.begin === "function";
}

/** The postgres.js driver over a pool; `close` ends the pool only when `owned`. */
export function postgresDriver(sql: Sql, opts: { owned?: boolean } = {}): Driver {
  return {
    name: "postgres",
    db: fromPostgres(sql),
    sql,
    transaction: (fn) => sql.begin((tx) => fn(fromPostgres(tx), tx)) as Promise<never>,
    txDb: (tx) => (isDb(tx) ? tx : fromPostgres(tx)),
    async listen(channel, fn) {
      const r = await sql.listen(channel, fn);
      return () => r.unlisten();
    },
    leaderLock: (key) => advisoryLeaderLock(sql, key),
    async close() {
      if (opts.owned) await sql.end({ timeout: 5 });
    },
  };
}

/**
 * A session-level advisory lock on a connection of its own. The lock goes with that connection, so
 * `check` verifies that the backend we talk to is still the one that took it.
 *
 * The connection is a one-connection postgres.js instance with the pool's options, not
 * `sql.reserve()`: a query on a reserved connection whose socket has closed throws from a
 * setImmediate and takes the whole process down (porsager/postgres#1208), which is what a database
 * restart did to every worker. This instance reconnects instead, and the pid check notices the new
 * session (the lock went with the old one).
 */
function advisoryLeaderLock(sql: Sql, key: number): LeaderLock {
  let conn: Sql | null = null;
  let backendPid: number | null = null;
  const open = (): Sql =>
    conn ??= postgres({
      ...sql.options,
      max: 1,
      idle_timeout: null,
      max_lifetime: null,
      shared: { retries: 0, typeArrayMap: {} },
    } as never);
  return {
    async tryAcquire() {
      const [r] = await open()`select pg_try_advisory_lock(${key}::bigint) as ok, pg_backend_pid() as pid`;
      backendPid = r.ok ? r.pid : null;
      return r.ok;
    },
    async check() {
      if (!conn || backendPid === null) return false;
      const [r] = await conn`select pg_backend_pid() as pid`;
      return r.pid === backendPid;
    },
    async release() {
      if (conn && backendPid !== null) await conn`select pg_advisory_unlock(${key}::bigint)`;
      backendPid = null;
    },
    drop() {
      conn?.end({ timeout: 0 }).catch(() => {});
      conn = null;
      backendPid = null;
    },
    fencedDb(fence) {
      const guarded = async <T>(fn: (tx: Db) => Promise<T>): Promise<T> => {
        if (!conn || backendPid === null) throw new NotLeaderError();
        return await conn.begin(async (tx) => {
          const f = fence();
          const [r] = await tx.unsafe(
            `select (select pg_backend_pid()) = $1
                    and exists (select 1 from pg_locks
                                 where locktype = 'advisory' and objsubid = 1 and granted
                                   and pid = pg_backend_pid()
                                   and ((classid::bigint << 32) | objid::bigint) = $2::bigint)
                    and (${f.text}) as ok`,
            [backendPid, key, ...f.params] as never[],
          );
          if (!r?.ok) throw new NotLeaderError();
          return await fn(fromPostgres(tx));
        }) as T;
      };
      return {
        query: (text, params) => guarded((tx) => tx.query(text, params)),
        exec: (text) => guarded((tx) => tx.exec(text)),
        begin: (fn) => guarded(fn),
      };
    },
  };
}

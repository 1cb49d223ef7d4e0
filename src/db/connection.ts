/**
 * The driver seam: storage code talks SQL text + parameters through `Db`, so that a driver of the
 * user's own can stand in for postgres.js (`createClient({ driver })`, `src/db/driver.ts`).
 * `fromPostgres` wraps a postgres.js `sql` or transaction.
 */
import postgres from "../vendor/postgres/index.js";
import { ConnectTimeoutError } from "../errors.ts";

/** A row as the driver returns it. */
export type Row = Record<string, any>;

/** What storage code needs from a connection, pool or transaction. */
export interface Db {
  /** Runs one statement with `$1..$n` parameters (prepared and cached). */
  query<T extends Row = Row>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /**
   * The same, each row an array of its columns in order (no object per row: cheaper for wide rows on the hot
   * path). Optional: a caller falls back to `query`.
   */
  values?(text: string, params?: readonly unknown[]): Promise<any[][]>;
  /** Runs a script of several statements without parameters (simple protocol). */
  exec(text: string): Promise<void>;
  /** Runs `fn` in a transaction (a savepoint when this is already a transaction). */
  begin<T>(fn: (tx: Db) => Promise<T>): Promise<T>;
}

/** The postgres.js type of a pool or transaction. */
export type Sql = postgres.Sql<any>;

/** Options of `connect`. */
export interface ConnectOptions {
  max?: number;
  /** Seconds to wait for a connection before failing. */
  connectTimeout?: number;
  /** Application name shown in pg_stat_activity. */
  applicationName?: string;
  /** Named prepared statements (default true); false through a transaction pooler. */
  prepare?: boolean;
}

/** Opens a postgres.js pool that parses int8 as number (ids stay below 2^53) and stays quiet. */
export function connect(databaseUrl: string, opts: ConnectOptions = {}): Sql {
  return postgres(databaseUrl, {
    max: opts.max ?? 10,
    connect_timeout: opts.connectTimeout ?? 10,
    // false: every statement unnamed (overrides the `prepare: true` of `fromPostgres`).
    prepare: opts.prepare ?? true,
    idle_timeout: 60,
    onnotice: () => {},
    connection: { application_name: opts.applicationName ?? "svc" },
    types: {
      int8num: {
        to: 20,
        from: [20],
        serialize: (x: unknown) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  });
}

/** Wraps a postgres.js pool or transaction as a `Db`. */
export function fromPostgres(sql: any): Db {
  return {
    query: (text, params = []) => sql.unsafe(text, params as unknown[], { prepare: true }),
    values: (text, params = []) => sql.unsafe(text, params as unknown[], { prepare: true }).values(),
    exec: async (text) => {
      await sql.unsafe(text).simple();
    },
    begin: (fn) =>
      typeof sql.begin === "function"
        ? sql.begin((tx: unknown) => fn(fromPostgres(tx)))
        : sql.savepoint((tx: unknown) => fn(fromPostgres(tx))),
  };
}

/** `host:port/database` of a pool, without user or password (for messages). */
export function poolTarget(sql: Sql | undefined): string {
  const o = sql?.options as { host?: string[]; port?: number[]; database?: string } | undefined;
  if (!o?.host?.length) return "the database";
  return `${o.host[0]}:${o.port?.[0] ?? 5432}${o.database ? `/${o.database}` : ""}`;
}

/** Error codes of a connection refused, reset or closed under a statement, or of a server going away or coming up. */
const STARTING_OR_REFUSED = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  // A statement written after the server closed the connection (an immediate restart between two statements).
  "EPIPE",
  "ECONNABORTED",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, in recovery)
]);

/** A connection refused, reset or closed under a statement, or a server starting up, shutting down or in recovery. */
export function isStartingOrRefused(e: unknown): boolean {
  return STARTING_OR_REFUSED.has(String((e as { code?: unknown } | null)?.code ?? ""));
}

/**
 * The first connection, with a real deadline. A `probe` given as a function is tried again while the
 * server refuses or is starting, until the deadline. postgres.js reconnects without end to an address that
 * accepts and closes (a service that is not PostgreSQL), so a first query there never settles, whatever
 * its `connect_timeout`. `probe` (the first query) races `timeoutMs`; when the deadline wins, `end`
 * stops the pool at once and a ConnectTimeoutError naming `target` (see `poolTarget`) and `fix` is thrown.
 */
export async function connectWithin<T>(
  probe: Promise<T> | (() => Promise<T>),
  o: { timeoutMs: number; target: string; fix: string; end: () => Promise<unknown> },
): Promise<T> {
  let settled = false;
  if (typeof probe === "function") {
    // A server that refuses or is still starting (a restart, a container that comes up after the app) is
    // tried again until the deadline, which then wins with a ConnectTimeoutError; any other error is final.
    const attempt = probe;
    probe = (async () => {
      for (;;) {
        try {
          return await attempt();
        } catch (e) {
          if (!isStartingOrRefused(e) || settled) throw e;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    })();
    probe.catch(() => {}); // settles after the race when the deadline won
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConnectTimeoutError(o.target, o.timeoutMs, o.fix)),
      o.timeoutMs,
    );
  });
  try {
    return await Promise.race([probe, deadline]);
  } catch (e) {
    if (e instanceof ConnectTimeoutError) await o.end().catch(() => {});
    throw e;
  } finally {
    settled = true;
    clearTimeout(timer);
  }
}

/** Throws when the database does not answer (a round trip of `select 1`). */
export async function ping(db: Db): Promise<void> {
  await db.query("select 1");
}

/**
 * The driver seam: storage code talks SQL text + parameters through `Db`, so an embedded driver can
 * stand in for postgres.js later. `fromPostgres` wraps a postgres.js `sql` or transaction.
 */
import postgres from "postgres";

/** A row as the driver returns it. */
export type Row = Record<string, any>;

/** What storage code needs from a connection, pool or transaction. */
export interface Db {
  /** Runs one statement with `$1..$n` parameters (prepared and cached). */
  query<T extends Row = Row>(text: string, params?: readonly unknown[]): Promise<T[]>;
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
}

/** Opens a postgres.js pool that parses int8 as number (ids stay below 2^53) and stays quiet. */
export function connect(databaseUrl: string, opts: ConnectOptions = {}): Sql {
  return postgres(databaseUrl, {
    max: opts.max ?? 10,
    connect_timeout: opts.connectTimeout ?? 10,
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
    exec: async (text) => {
      await sql.unsafe(text).simple();
    },
    begin: (fn) =>
      typeof sql.begin === "function"
        ? sql.begin((tx: unknown) => fn(fromPostgres(tx)))
        : sql.savepoint((tx: unknown) => fn(fromPostgres(tx))),
  };
}

/**
 * The client's own pool (from `databaseUrl`) behind a first-connection deadline. postgres.js reconnects
 * without end to an address that accepts and closes (a service that is not PostgreSQL, such as an HTTP
 * server answering 400), so a first query there never settled, and a silent address failed with its
 * raw `CONNECT_TIMEOUT`. Until one statement has gone through, every call waits for a probe that
 * races `connectTimeout`: when the deadline wins (or postgres.js's own connect timeout fires) the call
 * rejects with a ConnectTimeoutError, the pool that kept reconnecting is ended, and a fresh one is opened
 * for the next call, which gets a deadline of its own. A refused connection fails at once, as before.
 * Once connected, calls go straight to the pool (no extra await on the hot path).
 */
import { connectWithin, type Db, ping, poolTarget, type Sql } from "../db/connection.ts";
import { type Driver, postgresDriver } from "../db/driver.ts";
import { ConnectTimeoutError } from "../errors.ts";
import type { PoolerMode } from "../db/pooler.ts";

const FIX = "databaseUrl / DATABASE_URL (or raise connectTimeout)";

/**
 * A driver over pools that `open` makes, whose first connection has a deadline of `timeoutMs`; `pooler`
 * as the pools were opened for (src/db/pooler.ts).
 */
export function deadlineDriver(open: () => Sql, timeoutMs: number, pooler: PoolerMode = "none"): Driver {
  let sql = open();
  let inner = postgresDriver(sql, { owned: true, pooler });
  let connected = false;
  let probing: Promise<void> | null = null;

  const reopen = async () => {
    const old = sql;
    sql = open();
    inner = postgresDriver(sql, { owned: true, pooler });
    await old.end({ timeout: 0 });
  };
  const ready = (): Promise<void> => {
    probing ??= connectWithin(ping(inner.db), {
      timeoutMs,
      target: poolTarget(sql),
      fix: FIX,
      end: reopen,
    }).then(
      () => {
        connected = true;
      },
      async (e) => {
        probing = null;
        if ((e as { code?: unknown })?.code === "CONNECT_TIMEOUT") {
          // postgres.js's own connect timeout (a silent address) said it first: the same error.
          const target = poolTarget(sql);
          await reopen().catch(() => {});
          throw new ConnectTimeoutError(target, timeoutMs, FIX);
        }
        throw e;
      },
    );
    return probing;
  };
  const gated = <T>(f: () => Promise<T>): Promise<T> => (connected ? f() : ready().then(f));
  const db: Db = {
    query: (text, params) => gated(() => inner.db.query(text, params)),
    values: inner.db.values ? (text, params) => gated(() => inner.db.values!(text, params)) : undefined,
    exec: (text) => gated(() => inner.db.exec(text)),
    begin: (fn) => gated(() => inner.db.begin(fn)),
  };
  return {
    name: "postgres",
    pooler,
    db,
    get sql() {
      return sql;
    },
    transaction: (fn) => gated(() => inner.transaction(fn)),
    txDb: (tx) => inner.txDb(tx),
    listen: (channel, fn) => gated(() => inner.listen(channel, fn)),
    close: () => inner.close(),
  };
}

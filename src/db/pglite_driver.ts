/**
 * The embedded driver: PGlite (PostgreSQL 18 in WebAssembly) in this process, with its one session.
 * Everything runs on that session, so:
 * - statements and transactions are serialized: PGlite's own transaction mutex makes `query`, `exec`,
 *   `listen` and `transaction` wait while a transaction is open, so two `begin`s never interleave.
 *   A statement issued on the driver (not on the transaction) from inside an open transaction would
 *   wait for that transaction forever; it throws instead.
 * - LISTEN/NOTIFY is in-process: PGlite hands the session's notifications to its listeners.
 * - the leader lock is this process's: nothing else can open the data directory (`openPglite` takes
 *   a lock file), so this process is the leader (the first of its workers that asks for the key).
 * Not for production or for several processes: see docs/adr/007-embedded-pglite.md.
 */
import { PGlite, type Transaction } from "@electric-sql/pglite";
import { AsyncLocalStorage } from "node:async_hooks";
import type { Db } from "./connection.ts";
import { type Driver, isDb } from "./driver.ts";
import { lockDirectory, pathExists, removeDir } from "../runtime/runtime.ts";

/** Raised when another process has the data directory open. */
export class DataDirBusyError extends Error {
  constructor(dir: string) {
    super(
      `the embedded database in ${dir} is in use by another process (one process at a time: it is one ` +
        `PostgreSQL session); stop the other svc dev, or pass another --data-dir`,
    );
    this.name = "DataDirBusyError";
  }
}

/** An open embedded database. */
export interface EmbeddedDb {
  driver: Driver;
  /** Whether the data directory already held a database (false: created now). */
  existed: boolean;
}

/**
 * Opens PGlite with its data in `dataDir/pgdata` (created when missing; in memory without a
 * `dataDir`), holding `dataDir/svc.lock` so no other process opens it. `fresh` deletes the old data.
 */
export async function openPglite(dataDir?: string, opts: { fresh?: boolean } = {}): Promise<EmbeddedDb> {
  if (!dataDir) return { driver: pgliteDriver(await PGlite.create("memory://")), existed: false };
  const unlock = await lockDirectory(dataDir, "svc.lock");
  if (!unlock) throw new DataDirBusyError(dataDir);
  const pgdata = `${dataDir}/pgdata`;
  try {
    if (opts.fresh) await removeDir(pgdata);
    const existed = await pathExists(`${pgdata}/PG_VERSION`);
    const pg = await PGlite.create(pgdata);
    return {
      driver: pgliteDriver(pg, async () => {
        try {
          await pg.close();
        } finally {
          await unlock();
        }
      }),
      existed,
    };
  } catch (e) {
    await unlock();
    throw e;
  }
}

/** A driver over an open PGlite; `close` runs `onClose` (default: closes PGlite). */
export function pgliteDriver(pg: PGlite, onClose: () => Promise<void> = () => pg.close()): Driver {
  const inTx = new AsyncLocalStorage<{ open: boolean }>();
  const outside = () => {
    if (inTx.getStore()?.open) {
      throw new Error(
        "embedded PGlite has one session: a statement issued outside the open transaction would wait for it " +
          "forever; run it on the transaction (tx) instead",
      );
    }
  };
  const transaction = <T>(fn: (tx: Db, raw: unknown) => Promise<T>): Promise<T> => {
    outside();
    return pg.transaction(async (tx) => {
      const state = { open: true };
      try {
        return await inTx.run(state, () => fn(transactionDb(tx, 0), tx));
      } finally {
        state.open = false;
      }
    });
  };
  let closed = false;
  const leaders = new Map<number, object>();
  return {
    name: "pglite",
    db: {
      query: async (text, params = []) => {
        outside();
        return (await pg.query(text, params as unknown[])).rows as never[];
      },
      exec: async (text) => {
        outside();
        await pg.exec(text);
      },
      begin: (fn) => transaction((tx) => fn(tx)),
    },
    transaction,
    txDb: (tx) => (isDb(tx) ? tx : transactionDb(tx as Transaction, 0)),
    async listen(channel, fn) {
      outside();
      const unlisten = await pg.listen(channel, fn);
      return () => unlisten();
    },
    leaderLock: (key) => {
      // One process, so it leads; among workers sharing this driver, the first to ask holds the key.
      const me = {};
      const free = () => {
        if (leaders.get(key) === me) leaders.delete(key);
      };
      return {
        tryAcquire: () =>
          Promise.resolve(!closed && (leaders.get(key) ?? leaders.set(key, me).get(key)) === me),
        check: () => Promise.resolve(!closed && leaders.get(key) === me),
        release: () => Promise.resolve(free()),
        drop: free,
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      await onClose();
    },
  };
}

/** A `Db` over a PGlite transaction; a nested `begin` is a savepoint. */
function transactionDb(tx: Transaction, depth: number): Db {
  return {
    query: async (text, params = []) => (await tx.query(text, params as unknown[])).rows as never[],
    exec: async (text) => {
      await tx.exec(text);
    },
    begin: async (fn) => {
      const sp = `svc_savepoint_${depth}`;
      await tx.exec(`savepoint ${sp}`);
      try {
        const r = await fn(transactionDb(tx, depth + 1));
        await tx.exec(`release savepoint ${sp}`);
        return r;
      } catch (e) {
        await tx.exec(`rollback to savepoint ${sp}`);
        throw e;
      }
    },
  };
}

/**
 * Bounds on the admin reads and changes of `svc serve` and of the CLI (docs/reference/rest.md, "Busy"):
 *
 * - every statement runs under a statement timeout (in a transaction of its own whose
 *   `statement_timeout` is set locally, so it works the same through a transaction pooler);
 * - a statement of an HTTP request whose client went away is cancelled (PostgreSQL's cancel request);
 * - at most `maxConcurrent` admin operations use the pool at once; one that finds no room within
 *   `waitMs` fails with 503 `busy` instead of queueing without end behind the others.
 *
 * A timeout also answers 503 `busy`, with a message naming the limit. In `svc serve`, the bounds apply to
 * what runs inside {@link withAdminRequest} (the admin API and `/metrics`); the callback receiver on
 * the same pool is not limited by them. In the CLI they apply to every statement of the command.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Db } from "./connection.ts";
import { SvcError } from "../errors.ts";

/** The limits of a guarded pool. */
export interface AdminLimits {
  /** Statement timeout of each admin statement (ms). */
  statementTimeoutMs: number;
  /** Admin operations running on the pool at once. */
  maxConcurrent: number;
  /** How long an operation waits for room before it is refused as busy (ms). */
  waitMs: number;
  /** `always`: every statement (a CLI command); `requests`: only inside {@link withAdminRequest}. */
  scope: "always" | "requests";
  /** What to raise for more time, for messages (e.g. `--statement-timeout`). */
  timeoutFix: string;
}

/** The database is too busy for this request now (the pool is taken, or a statement ran too long). */
export class BusyError extends SvcError {
  constructor(message: string, readonly retryAfterSeconds: number | null = null) {
    super(message, "busy");
    this.name = "BusyError";
  }
}

interface RequestScope {
  signal?: AbortSignal;
}

const requests = new AsyncLocalStorage<RequestScope>();

/** Runs `fn` as an admin request: its statements are bounded, and cancelled when `signal` aborts. */
export function withAdminRequest<T>(signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  return requests.run({ signal }, fn);
}

/** A counting semaphore whose waiters give up after a while. */
class Room {
  private used = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly size: number) {}

  async enter(waitMs: number, signal?: AbortSignal): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", gone);
        resolve(); // `used` is handed over by leave()
      };
      const drop = () => {
        const i = this.waiting.indexOf(go);
        if (i >= 0) this.waiting.splice(i, 1);
        signal?.removeEventListener("abort", gone);
      };
      const gone = () => {
        clearTimeout(timer);
        drop();
        reject(signal!.reason ?? new Error("request aborted"));
      };
      const timer = setTimeout(() => {
        drop();
        reject(
          new BusyError(
            `the database pool is busy: ${this.size} admin operations are running and none finished within ` +
              `${waitMs / 1000} s; try again shortly`,
            Math.max(1, Math.ceil(waitMs / 1000)),
          ),
        );
      }, waitMs);
      signal?.addEventListener("abort", gone, { once: true });
      this.waiting.push(go);
    });
  }

  leave(): void {
    const next = this.waiting.shift();
    if (next) next(); // the place passes to the next waiter
    else this.used--;
  }
}

/** A `Db` whose queries are cancelled when `signal` aborts (postgres.js queries have `cancel()`). */
function cancellable(db: Db, signal: AbortSignal | undefined): Db {
  if (!signal) return db;
  return {
    query: (text, params) => {
      if (signal.aborted) return Promise.reject(signal.reason ?? new Error("request aborted"));
      const q = db.query(text, params) as Promise<any> & { cancel?: () => unknown };
      if (typeof q.cancel !== "function") return q;
      const cancel = () => {
        try {
          q.cancel!();
        } catch { /* already done */ }
      };
      signal.addEventListener("abort", cancel, { once: true });
      return q.finally(() => signal.removeEventListener("abort", cancel));
    },
    exec: (text) => db.exec(text),
    begin: (fn) => db.begin((tx) => fn(cancellable(tx, signal))),
  };
}

/** SQLSTATE 57014: a statement cancelled (by its statement timeout, or by a cancel request). */
function isCancelled(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === "57014";
}

/** Wraps a pool's `Db` with the admin limits. */
export function guardDb(db: Db, limits: AdminLimits): Db {
  const room = new Room(Math.max(1, limits.maxConcurrent));
  const ms = String(Math.max(1, Math.round(limits.statementTimeoutMs)));
  const guarded = async <T>(scope: RequestScope, fn: (tx: Db) => Promise<T>): Promise<T> => {
    const signal = scope.signal;
    if (signal?.aborted) throw signal.reason ?? new Error("request aborted");
    await room.enter(limits.waitMs, signal);
    try {
      return await db.begin(async (tx) => {
        await tx.query(`select set_config('statement_timeout', $1, true)`, [ms]);
        return await fn(cancellable(tx, signal));
      });
    } catch (e) {
      if (isCancelled(e) && !signal?.aborted) {
        throw new BusyError(
          `the database did not finish within the statement timeout of ${
            limits.statementTimeoutMs / 1000
          } s; ` +
            `narrow the request (a filter, a smaller page) or raise ${limits.timeoutFix}`,
        );
      }
      throw e;
    } finally {
      room.leave();
    }
  };
  const scopeOf = (): RequestScope | undefined =>
    requests.getStore() ?? (limits.scope === "always" ? {} : undefined);
  return {
    query: (text, params) => {
      const scope = scopeOf();
      return scope ? guarded(scope, (tx) => tx.query(text, params)) : db.query(text, params);
    },
    exec: (text) => db.exec(text),
    begin: (fn) => {
      const scope = scopeOf();
      return scope ? guarded(scope, fn) : db.begin(fn);
    },
  };
}

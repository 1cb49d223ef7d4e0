/**
 * Leader election: one leader per database (per schema), by a term in the `leadership` row.
 *
 * One protocol for every worker, whichever URLs it has, and it works through a transaction pooler: no
 * session state, no advisory lock, no ending of other sessions. A process leads while it holds the
 * current term (`holder`, `term`) and renews it (`renewed_at`, the database's clock) while it makes
 * progress (every `leaderTtl / 5`, at least every second). A challenger takes the next term in one
 * statement when the row has no holder or was not renewed for `leaderTtl`, so a stalled leader (its
 * process stopped, its event loop blocked by a handler) is replaced within `leaderTtl` plus one election
 * interval.
 *
 * Every duty runs through `fenced`: each statement (or `begin` block) in a transaction of its own that
 * first locks the leadership row `for key share` where it still names this process and its term, or throws
 * `NotLeaderError` and writes nothing. A challenger's take (`for update skip locked`) cannot pass a duty in
 * flight, so a duty commits under the term it checked, or not at all. The holder's renewal (an update of
 * `renewed_at` only, a `for no key update` lock) does not wait for its own duties: were it queued behind a
 * duty of a leader whose event loop then blocks, it would renew the term the moment PostgreSQL ends that
 * duty's transaction, and the takeover would wait a second TTL. The fence also sets the
 * transaction's `idle_in_transaction_session_timeout` to `leaderTtl`: a leader stopped inside a duty's
 * transaction has it ended by PostgreSQL (its own session only), which rolls back what it had not
 * committed and frees its locks. A leader stopped between a statement's describe and its execution is idle
 * too: inside a transaction the vendored driver ends the describe with Sync (patch 0005), and on PostgreSQL
 * 17 and later the fence's `transaction_timeout` (twice `leaderTtl` and a second) bounds the transaction as
 * well (ADR 014). The fence's `statement_timeout` of twice `leaderTtl`
 * cancels a duty statement that runs so long. See docs/guide/operations.md ("The leader") and ADR 014.
 */
import type { Db } from "../db/connection.ts";
import { NotLeaderError } from "../db/driver.ts";
import type { SchemaNames } from "../db/names.ts";
import type { Logger } from "../types.ts";
import { fenceTerm, renewTerm, resignTerm, takeTerm } from "../storage/shared/leadership.ts";

/** What the election needs. */
export interface ElectionOptions {
  /** The pool: a pooled URL does (every statement is a transaction of its own). */
  db: Db;
  names: SchemaNames;
  /** This runtime's id (the term's holder). */
  id: string;
  /** A term not renewed for this long is taken over (ms). */
  ttlMs: number;
  /**
   * The clock of this process's renewal schedule (ms, default `Date.now`); tests drive it instead of
   * waiting. A term's age is the database's clock (`renewed_at` against `now()`), the same for every process.
   */
  now?: () => number;
}

export class LeaderElection {
  isLeader = false;
  /** The term this process holds while it leads. */
  term = 0;
  /** When this process last renewed (or took) its term (its own clock, ms). */
  private lastRenew = 0;
  readonly fenced: Db;
  private readonly now: () => number;

  constructor(
    private readonly logger: Logger,
    private readonly onChange: (leader: boolean) => void,
    private readonly options: ElectionOptions,
  ) {
    this.now = options.now ?? Date.now;
    const guarded = async <T>(fn: (tx: Db) => Promise<T>): Promise<T> => {
      if (!this.isLeader) throw new NotLeaderError();
      const term = this.term;
      return await options.db.begin(async (tx) => {
        if (!await fenceTerm(tx, options.names, options.id, term, options.ttlMs)) throw new NotLeaderError();
        return await fn(tx);
      });
    };
    this.fenced = {
      query: (text, params) => guarded((tx) => tx.query(text, params)),
      exec: (text) => guarded((tx) => tx.exec(text)),
      begin: (fn) => guarded(fn),
    };
  }

  /** How often the leader renews its term. */
  get renewEveryMs(): number {
    return Math.max(200, Math.min(1_000, this.options.ttlMs / 5));
  }

  /** One election step: keep (renewing the term when due) or try to take leadership. Whether this process leads. */
  async tick(): Promise<boolean> {
    if (this.isLeader) {
      await this.renewIfDue();
      return this.isLeader;
    }
    try {
      if (await this.tryTake()) {
        this.isLeader = true;
        this.onChange(true);
      }
    } catch (e) {
      this.logger.debug(`svc: leader election failed: ${(e as Error).message}`);
    }
    return this.isLeader;
  }

  /**
   * Renews the term if due (also called between duties, so a long run of duties does not let it lapse).
   * Another holder of the term: leadership is lost at once. A failed renewal (the database unreachable)
   * keeps leadership until the last renewal is `leaderTtl` old, when a challenger may take the term: the
   * fence keeps the duties safe meanwhile.
   */
  async renewIfDue(): Promise<void> {
    if (!this.isLeader || this.now() - this.lastRenew < this.renewEveryMs) return;
    try {
      if (!await renewTerm(this.options.db, this.options.names, this.options.id, this.term)) {
        throw new NotLeaderError();
      }
      this.lastRenew = this.now();
    } catch (e) {
      if (e instanceof NotLeaderError) this.lose("another process took over the term");
      else if (this.now() - this.lastRenew >= this.options.ttlMs) {
        this.lose(`the term could not be renewed for ${this.options.ttlMs} ms: ${(e as Error).message}`);
      }
    }
  }

  /**
   * Takes the next term when the row has no holder, is this process's own, or was not renewed for the TTL;
   * skips the row while a duty of the holder is in flight (it holds the row `for key share`).
   */
  private async tryTake(): Promise<boolean> {
    const r = await takeTerm(this.options.db, this.options.names, this.options.id, this.options.ttlMs);
    if (!r) return false;
    this.term = r.term;
    this.lastRenew = this.now();
    if (r.previous !== null && r.previous !== this.options.id && !r.fresh) {
      this.logger.warn(
        `svc: the leader ${r.previous} has not renewed its term ${r.previousTerm} for ${
          r.ageSeconds === null ? "ever" : `${Math.round(r.ageSeconds)} s`
        }; took over with term ${this.term}`,
      );
    }
    return true;
  }

  /** Gives the term back (shutdown), so that another process takes it at its next election. */
  async resign(): Promise<void> {
    if (!this.isLeader) return;
    try {
      await resignTerm(this.options.db, this.options.names, this.options.id, this.term);
    } catch { /* the term lapses after the TTL */ }
    this.lose("shutdown", "info");
  }

  private lose(why: string, level: "warn" | "info" = "warn"): void {
    if (!this.isLeader) return;
    this.isLeader = false;
    this.logger[level](`svc: leadership released (${why})`);
    this.onChange(false);
  }
}

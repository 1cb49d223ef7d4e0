/**
 * Leader election: one leader per database (per schema).
 *
 * The leader holds a session-level advisory lock on a connection of its own, and a term in the
 * `leadership` table that it renews while it makes progress (every `leaderTtl / 5`, at least every
 * second). A leader that stops renewing (its process stopped, its event loop blocked by a handler) is
 * replaced: a challenger that finds the term not renewed for `leaderTtl` ends the holder's lock session
 * with `pg_terminate_backend` and takes the lock and the next term, within `leaderTtl` plus one election
 * interval. Every duty runs through the lock's fenced `Db` (src/db/driver.ts): in a transaction that
 * first checks the lock and the term, so a former leader that resumes changes nothing. Losing the lock
 * connection loses leadership at once. See docs/guide/operations.md ("The leader").
 */
import type { Db } from "../db/connection.ts";
import { type LeaderLock, NotLeaderError } from "../db/driver.ts";
import type { SchemaNames } from "../db/names.ts";
import type { Logger } from "../types.ts";

/** What the election needs besides the lock. */
export interface ElectionOptions {
  /** The pool, for reading the term and for ending a stale holder's session. */
  db: Db;
  names: SchemaNames;
  /** This runtime's id (the term's holder). */
  id: string;
  /** The advisory lock key (to find the holder's session). */
  key: number;
  /** A term not renewed for this long is taken over (ms). */
  ttlMs: number;
}

export class LeaderElection {
  isLeader = false;
  /** The term this process holds while it leads. */
  term = 0;
  private lastRenew = 0;
  /** A term seen with no renewal at all, to take over at the next sighting. */
  private unrenewed: string | null = null;
  private cannotTerminate = false;
  readonly fenced: Db;

  constructor(
    private readonly lock: LeaderLock,
    private readonly logger: Logger,
    private readonly onChange: (leader: boolean) => void,
    private readonly o: ElectionOptions,
  ) {
    this.fenced = lock.fencedDb(() => ({
      text: `exists (select 1 from ${o.names.q}.leadership where holder = $3 and term = $4)`,
      params: [o.id, this.term],
    }));
  }

  /** How often the leader renews its term. */
  get renewEveryMs(): number {
    return Math.max(200, Math.min(1_000, this.o.ttlMs / 5));
  }

  /** One election step: keep (renewing the term when due) or try to take leadership. Whether this process leads. */
  async tick(): Promise<boolean> {
    try {
      if (this.isLeader) {
        if (Date.now() - this.lastRenew >= this.renewEveryMs) await this.renew();
        else if (!(await this.lock.check())) this.lose("leader connection was replaced");
      } else if (await this.tryTake()) {
        this.isLeader = true;
        this.onChange(true);
      }
    } catch (e) {
      if (this.isLeader) {
        this.lose(
          e instanceof NotLeaderError
            ? "another process took over the term"
            : `leader connection failed: ${(e as Error).message}`,
        );
      }
      this.lock.drop();
    }
    return this.isLeader;
  }

  /** Renews the term if due (called between duties, so a long duty does not let it lapse). */
  async renewIfDue(): Promise<void> {
    if (this.isLeader && Date.now() - this.lastRenew >= this.renewEveryMs) {
      try {
        await this.renew();
      } catch (e) {
        this.lose(e instanceof NotLeaderError ? "another process took over the term" : (e as Error).message);
        this.lock.drop();
      }
    }
  }

  private async renew(): Promise<void> {
    const rows = await this.fenced.query(
      `update ${this.o.names.q}.leadership set renewed_at = now() where holder = $1 and term = $2 returning term`,
      [this.o.id, this.term],
    );
    if (rows.length === 0) throw new NotLeaderError();
    this.lastRenew = Date.now();
  }

  /** Takes the lock (ending a stale holder's session first) and the next term. */
  private async tryTake(): Promise<boolean> {
    if (!(await this.lock.tryAcquire())) {
      if (!(await this.endStaleHolder())) return false;
      if (!(await this.lock.tryAcquire())) return false;
    }
    // The lock is ours: the next term, written on the lock's session (fenced on the lock only).
    this.term = -1;
    const [r] = await this.lock.fencedDb(() => ({ text: "true", params: [] })).query(
      `update ${this.o.names.q}.leadership set holder = $1, term = term + 1, renewed_at = now() returning term`,
      [this.o.id],
    );
    this.term = Number(r.term);
    this.lastRenew = Date.now();
    return true;
  }

  /**
   * When the holder's term was not renewed for the TTL (or never, seen twice), ends the sessions that
   * hold the lock. Whether it did.
   */
  private async endStaleHolder(): Promise<boolean> {
    const [r] = await this.o.db.query(
      `select l.holder, l.term, l.renewed_at is null as never,
              coalesce(l.renewed_at < now() - $1::bigint * interval '1 millisecond', true) as stale,
              extract(epoch from now() - l.renewed_at)::float8 as age,
              array(select pid from pg_locks
                     where locktype = 'advisory' and objsubid = 1 and granted
                       and ((classid::bigint << 32) | objid::bigint) = $2::bigint) as pids
         from ${this.o.names.q}.leadership l`,
      [this.o.ttlMs, this.o.key],
    );
    const pids: number[] = (r?.pids ?? []).map(Number);
    if (!r || !r.stale || pids.length === 0) {
      this.unrenewed = null;
      return false;
    }
    if (r.never) {
      // No renewal at all yet (a holder that has just taken the lock, or one of the older line): only
      // when the same term is seen again an election later.
      const seen = `${r.holder}:${r.term}`;
      if (this.unrenewed !== seen) {
        this.unrenewed = seen;
        return false;
      }
    }
    this.unrenewed = null;
    try {
      await this.o.db.query(`select pg_terminate_backend(pid, 5000) from unnest($1::int[]) as pid`, [pids]);
    } catch (e) {
      if (!this.cannotTerminate) {
        this.cannotTerminate = true;
        this.logger.error(
          `svc: the leader ${r.holder ?? "(unknown)"} has not renewed its term for ${
            r.age === null ? "ever" : `${Math.round(Number(r.age))} s`
          } and cannot be replaced: ending its session failed (${(e as Error).message}); ` +
            `grant this role pg_signal_backend, or run every worker as the same role`,
        );
      }
      return false;
    }
    this.logger.warn(
      `svc: the leader ${r.holder ?? "(unknown)"} has not renewed its term ${r.term} for ${
        r.age === null ? "ever" : `${Math.round(Number(r.age))} s`
      }; ended its lock session (pid ${pids.join(", ")}) to take over`,
    );
    return true;
  }

  /** Releases the lock and the connection. */
  async resign(): Promise<void> {
    if (this.isLeader) {
      try {
        await this.lock.release();
      } catch { /* the connection is going anyway */ }
      this.lose("shutdown", "info");
    }
    this.lock.drop();
  }

  private lose(why: string, level: "warn" | "info" = "warn"): void {
    if (!this.isLeader) return;
    this.isLeader = false;
    this.logger[level](`svc: leadership released (${why})`);
    this.onChange(false);
  }
}

/**
 * Leader election: one leader per database (per schema), by the driver's leader lock (postgres.js: a
 * session-level advisory lock held on a connection reserved for it; embedded PGlite: this process is
 * the only one, so it leads). Leadership is lost with that connection: every tick checks that the lock
 * is still held, and a failed check drops leadership at once. Non-leaders try to take the lock every
 * `electionInterval`.
 */
import type { LeaderLock } from "../db/driver.ts";
import type { Logger } from "../types.ts";

export class LeaderElection {
  isLeader = false;

  constructor(
    private readonly lock: LeaderLock,
    private readonly logger: Logger,
    private readonly onChange: (leader: boolean) => void,
  ) {}

  /** One election step: keep or try to take leadership. Returns whether this process leads. */
  async tick(): Promise<boolean> {
    try {
      if (this.isLeader) {
        if (!(await this.lock.check())) this.lose("leader connection was replaced");
      } else if (await this.lock.tryAcquire()) {
        this.isLeader = true;
        this.onChange(true);
      }
    } catch (e) {
      if (this.isLeader) this.lose(`leader connection failed: ${(e as Error).message}`);
      this.lock.drop();
    }
    return this.isLeader;
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
    this.isLeader = false;
    this.logger[level](`svc: leadership released (${why})`);
    this.onChange(false);
  }
}

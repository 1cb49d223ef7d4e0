/**
 * Leader election: one leader per database (per schema), by a session-level advisory lock held on a
 * connection reserved for it. Leadership is lost with that connection: every tick checks that the
 * backend holding the lock is still the one we talk to, and a failed check drops leadership at once.
 * Non-leaders try to take the lock every `electionInterval`.
 */
import type { Sql } from "../db/connection.ts";
import type { Logger } from "../types.ts";

export class LeaderElection {
  private conn: Awaited<ReturnType<Sql["reserve"]>> | null = null;
  private backendPid: number | null = null;
  isLeader = false;

  constructor(
    private readonly sql: Sql,
    private readonly lockKey: number,
    private readonly logger: Logger,
    private readonly onChange: (leader: boolean) => void,
  ) {}

  /** One election step: keep or try to take leadership. Returns whether this process leads. */
  async tick(): Promise<boolean> {
    try {
      if (!this.conn) this.conn = await this.sql.reserve();
      if (this.isLeader) {
        const [r] = await this.conn`select pg_backend_pid() as pid`;
        if (r.pid !== this.backendPid) this.lose("leader connection was replaced");
      } else {
        const [r] = await this.conn`select pg_try_advisory_lock(${this.lockKey}::bigint) as ok, pg_backend_pid() as pid`;
        if (r.ok) {
          this.isLeader = true;
          this.backendPid = r.pid;
          this.onChange(true);
        }
      }
    } catch (e) {
      if (this.isLeader) this.lose(`leader connection failed: ${(e as Error).message}`);
      this.dropConnection();
    }
    return this.isLeader;
  }

  /** Releases the lock and the connection. */
  async resign(): Promise<void> {
    if (this.conn && this.isLeader) {
      try {
        await this.conn`select pg_advisory_unlock(${this.lockKey}::bigint)`;
      } catch { /* the connection is going anyway */ }
    }
    if (this.isLeader) this.lose("shutdown", "info");
    this.dropConnection();
  }

  private lose(why: string, level: "warn" | "info" = "warn"): void {
    this.isLeader = false;
    this.backendPid = null;
    this.logger[level](`svc: leadership released (${why})`);
    this.onChange(false);
  }

  private dropConnection(): void {
    try {
      this.conn?.release();
    } catch { /* already gone */ }
    this.conn = null;
  }
}

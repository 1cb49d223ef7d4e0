/**
 * The maintenance loop: every tick it runs one election step; while leader it runs the duties (the table in
 * duties.ts, and the worker's extra ones) through the leader's fenced connection: a duty of a process that
 * has lost its term writes nothing (src/worker/leader.ts). The term is renewed between duties when due.
 */
import type { LeaderElection } from "../leader.ts";
import { NotLeaderError } from "../../db/driver.ts";
import { Wakeup } from "../../timing.ts";
import type { Duty, MaintenanceContext } from "./types.ts";
import { standardDuties } from "./duties.ts";

export type { Duty, MaintenanceContext } from "./types.ts";

export class MaintenanceLoop {
  private stopping = false;
  private loop: Promise<void> | null = null;
  private readonly wakeup = new Wakeup();
  private readonly lastRun = new Map<string, number>();
  lastTick = Date.now();
  readonly duties: Duty[];

  constructor(
    private readonly m: MaintenanceContext,
    private readonly election: LeaderElection,
    readonly intervalMs: number,
    private readonly electionIntervalMs: number,
    extraDuties: Duty[] = [],
  ) {
    this.duties = [...standardDuties(intervalMs), ...extraDuties];
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeup.notify();
    await this.loop;
    await this.election.resign();
  }

  alive(now = Date.now()): boolean {
    const period = Math.min(this.intervalMs, this.electionIntervalMs);
    return !this.stopping && now - this.lastTick < 3 * Math.max(period, 1000) + 2000;
  }

  private async run(): Promise<void> {
    let lastElection = 0;
    while (!this.stopping) {
      this.lastTick = Date.now();
      if (this.election.isLeader || Date.now() - lastElection >= this.electionIntervalMs) {
        lastElection = Date.now();
        await this.election.tick();
      }
      if (this.election.isLeader) {
        for (const d of this.duties) {
          if (this.stopping) break;
          if (!this.lastRun.has(d.name) && d.deferred) this.lastRun.set(d.name, Date.now());
          const last = this.lastRun.get(d.name) ?? 0;
          if (Date.now() - last < d.everyMs) continue;
          this.lastRun.set(d.name, Date.now());
          await this.election.renewIfDue();
          if (!this.election.isLeader) break;
          const t0 = performance.now();
          let outcome = "ok";
          try {
            await d.run(this.m);
          } catch (e) {
            outcome = e instanceof NotLeaderError ? "not_leader" : "error";
            if (e instanceof NotLeaderError) break; // the election step below notices
            this.m.logger.error(`svc: maintenance duty ${d.name} failed: ${(e as Error).message}`);
          } finally {
            const metrics = this.m.metrics;
            if (metrics) {
              metrics.f.svc_leader_duty_runs_total.with(d.name, outcome).inc();
              metrics.f.svc_leader_duty_duration_seconds.with(d.name).observe(
                (performance.now() - t0) / 1000,
              );
            }
          }
        }
      }
      await this.wakeup.wait(
        this.election.isLeader ? this.intervalMs : Math.min(this.intervalMs, this.electionIntervalMs),
      );
    }
  }
}

/**
 * The engine the client and the worker use: it reads the storage state (once, and again on
 * `refresh()`) and hands every operation to the engine that state names: `canonical` while the
 * database is on the older line (`canonical`, `prepared`), `queue_storage` once it is `active`.
 * Reads of single jobs and admin changes go through the stable SQL API, which routes in the database
 * itself, so they are right in every state.
 */
import type { Db } from "../db/connection.ts";
import { qsNames, type SchemaNames } from "../db/names.ts";
import type { Job, JobPage, ListJobsOptions, QueueInfo, RuntimeInfo } from "../types.ts";
import type {
  AttemptRef,
  CallbackRecord,
  CallbackResolution,
  ClaimRequest,
  Completion,
  Failure,
  JobFilter,
  KindCounts,
  MaintainedJob,
  NewJob,
  ResolveAction,
  ResolveArgs,
  Retention,
  RingReport,
  RuntimeReport,
  StorageEngine,
  StorageState,
  ThroughputPoint,
} from "./engine.ts";
import { CanonicalEngine } from "./canonical/engine.ts";
import { QueueStorageEngine } from "./queue_storage/engine.ts";
import { CronStore } from "./shared/cron.ts";
import { readStorageState } from "./shared/state.ts";

export class RoutedEngine implements StorageEngine {
  readonly name = "routed";
  readonly cron: CronStore;
  readonly canonical: CanonicalEngine;
  private qs: QueueStorageEngine | null = null;
  private current: Promise<StorageEngine> | null = null;

  constructor(
    private readonly db: Db,
    private readonly n: SchemaNames,
    private readonly liveWithinMs = 90_000,
  ) {
    this.canonical = new CanonicalEngine(db, n, liveWithinMs);
    this.cron = new CronStore(db, n);
  }

  /** The engine the storage state names (read once; `refresh` reads it again). */
  engine(): Promise<StorageEngine> {
    return this.current ??= this.resolve().catch((e) => {
      this.current = null; // not migrated yet, or unreachable: ask again next time
      throw e;
    });
  }

  /** Reads the storage state again (after a transition step). */
  refresh(): void {
    this.current = null;
  }

  /** The queue-storage engine (null before schema version 4). */
  async queueStorage(): Promise<QueueStorageEngine | null> {
    await this.engine();
    return this.qs;
  }

  private async resolve(): Promise<StorageEngine> {
    const [r] = await this.db.query(`select to_jsonb(s) as s from ${this.n.q}.storage_state s`);
    const s = r?.s ?? {};
    if (s.qs_schema && !this.qs) {
      this.qs = new QueueStorageEngine(
        this.db,
        this.n,
        qsNames(s.qs_schema),
        { slots: Number(s.qs_slots), rotationMs: Number(s.qs_rotation_ms) },
        this.liveWithinMs,
      );
    }
    return s.transition === "active" && this.qs ? this.qs : this.canonical;
  }

  async enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return (await this.engine()).enqueue(db, jobs);
  }
  async claim(req: ClaimRequest): Promise<Job[]> {
    return (await this.engine()).claim(req);
  }
  async recordStarts(items: AttemptRef[]): Promise<number[]> {
    return (await this.engine()).recordStarts(items);
  }
  async giveBack(items: AttemptRef[]): Promise<number[]> {
    return (await this.engine()).giveBack(items);
  }
  async complete(items: Completion[], keep: boolean): Promise<number[]> {
    return (await this.engine()).complete(items, keep);
  }
  async fail(item: Failure): Promise<Job | null> {
    return (await this.engine()).fail(item);
  }
  async snooze(id: number, lease: number, delayMs: number): Promise<boolean> {
    return (await this.engine()).snooze(id, lease, delayMs);
  }
  async heartbeat(items: AttemptRef[]): Promise<void> {
    return (await this.engine()).heartbeat(items);
  }
  async park(id: number, lease: number, callbackId: string): Promise<boolean> {
    return (await this.engine()).park(id, lease, callbackId);
  }
  async getJob(id: number): Promise<Job | null> {
    return (await this.engine()).getJob(id);
  }
  async listJobs(opts: ListJobsOptions): Promise<JobPage> {
    return (await this.engine()).listJobs(opts);
  }
  async cancel(id: number): Promise<Job> {
    return (await this.engine()).cancel(id);
  }
  async retry(id: number): Promise<Job> {
    return (await this.engine()).retry(id);
  }
  async bulkCancel(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number> {
    return (await this.engine()).bulkCancel(filter, opts);
  }
  async bulkRetry(filter: JobFilter, opts?: { dryRun?: boolean }): Promise<number> {
    return (await this.engine()).bulkRetry(filter, opts);
  }
  async pauseQueue(name: string): Promise<void> {
    return (await this.engine()).pauseQueue(name);
  }
  async resumeQueue(name: string): Promise<void> {
    return (await this.engine()).resumeQueue(name);
  }
  async queueKnown(name: string, liveWithinMs?: number): Promise<boolean> {
    return (await this.engine()).queueKnown(name, liveWithinMs);
  }
  async listQueues(): Promise<QueueInfo[]> {
    return (await this.engine()).listQueues();
  }
  async kindCounts(): Promise<KindCounts> {
    return (await this.engine()).kindCounts();
  }
  async throughput(minutes: number): Promise<ThroughputPoint[]> {
    return (await this.engine()).throughput(minutes);
  }
  async registerCallback(
    id: number,
    lease: number,
    timeoutMs: number,
    kind: "in_process" | "http",
  ): Promise<string | null> {
    return (await this.engine()).registerCallback(id, lease, timeoutMs, kind);
  }
  async getCallback(id: string): Promise<CallbackRecord | null> {
    return (await this.engine()).getCallback(id);
  }
  async listCallbacks(jobId: number): Promise<CallbackRecord[]> {
    return (await this.engine()).listCallbacks(jobId);
  }
  async resolveCallback(id: string, action: ResolveAction, args: ResolveArgs): Promise<CallbackResolution> {
    return (await this.engine()).resolveCallback(id, action, args);
  }
  async promote(): Promise<number> {
    return (await this.engine()).promote();
  }
  async rescue(rescueAfterMs: number): Promise<MaintainedJob[]> {
    return (await this.engine()).rescue(rescueAfterMs);
  }
  async expireCallbacks(): Promise<MaintainedJob[]> {
    return (await this.engine()).expireCallbacks();
  }
  async cleanup(retention: Retention): Promise<number> {
    return (await this.engine()).cleanup(retention);
  }
  async refreshStatistics(): Promise<boolean> {
    return (await this.engine()).refreshStatistics();
  }
  async maintainRing(retention: Retention, parkAfterMs: number): Promise<RingReport> {
    return (await this.engine()).maintainRing(retention, parkAfterMs);
  }
  async upsertRuntime(r: RuntimeReport): Promise<void> {
    return (await this.engine()).upsertRuntime(r);
  }
  async deleteRuntime(id: string): Promise<void> {
    return (await this.engine()).deleteRuntime(id);
  }
  async listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]> {
    return (await this.engine()).listRuntimes(liveWithinMs);
  }
  storageState(): Promise<StorageState> {
    return readStorageState(this.db, this.n);
  }
}

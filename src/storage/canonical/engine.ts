/**
 * The `canonical` storage engine: one jobs table updated in place, claims with `FOR UPDATE SKIP LOCKED`.
 * One file per SQL operation beside this one; this class only binds them to a pool and a schema.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job, JobPage, ListJobsOptions, QueueInfo, RuntimeInfo } from "../../types.ts";
import type {
  CallbackRecord,
  CallbackResolution,
  Completion,
  Failure,
  JobFilter,
  MaintainedJob,
  NewJob,
  ParkRequest,
  Retention,
  RuntimeReport,
  StorageEngine,
} from "../engine.ts";
import { enqueueJobs } from "./enqueue.ts";
import { claimJobs } from "./claim.ts";
import { completeJobs } from "./complete.ts";
import { failJob, heartbeatJobs, parkJobs, snoozeJob } from "./fail.ts";
import { bulkCancel, bulkRetry, cancelJob, getJob, listJobs, retryJob } from "./admin.ts";
import { listQueues, queueKnown, setQueuePaused } from "./queues.ts";
import {
  getCallback,
  listCallbacks,
  registerCallback,
  resolveCallbacks,
  type ResolveRequest,
} from "./callbacks.ts";
import {
  cleanupFinished,
  expireCallbacks,
  promoteDue,
  refreshStatistics,
  rescueStale,
} from "./maintenance.ts";
import { deleteRuntime, listRuntimes, upsertRuntime } from "./runtimes.ts";
import { Batcher } from "../../runtime/batcher.ts";

/** The jobs-table engine. */
export class CanonicalEngine implements StorageEngine {
  readonly name = "canonical";
  /** Parks and callback resolutions that arrive together are written together (group commit). */
  private readonly parks: Batcher<ParkRequest, boolean>;
  private readonly resolutions: Batcher<ResolveRequest, CallbackResolution>;

  constructor(private readonly db: Db, private readonly n: SchemaNames) {
    this.parks = new Batcher(async (items) => {
      const parked = new Set(await parkJobs(db, n, items));
      return items.map((p) => parked.has(p.id));
    });
    this.resolutions = new Batcher((items) => resolveCallbacks(db, n, items));
  }

  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return enqueueJobs(db, this.n, jobs);
  }
  claim(
    queue: string,
    limit: number,
    runtimeId: string,
    timeoutsMs: Record<string, number>,
    callbackTimeoutsMs: Record<string, number> = {},
  ): Promise<Job[]> {
    return claimJobs(this.db, this.n, queue, limit, runtimeId, timeoutsMs, callbackTimeoutsMs);
  }
  complete(items: Completion[], deleteRows: boolean): Promise<number[]> {
    return completeJobs(this.db, this.n, items, deleteRows);
  }
  fail(item: Failure): Promise<Job | null> {
    return failJob(this.db, this.n, item);
  }
  snooze(id: number, lease: number, delayMs: number): Promise<boolean> {
    return snoozeJob(this.db, this.n, id, lease, delayMs);
  }
  heartbeat(items: { id: number; lease: number }[]): Promise<void> {
    return heartbeatJobs(this.db, this.n, items);
  }
  park(id: number, lease: number, callbackId: string): Promise<boolean> {
    return this.parks.add({ id, lease, callbackId });
  }
  getJob(id: number): Promise<Job | null> {
    return getJob(this.db, this.n, id);
  }
  listJobs(opts: ListJobsOptions): Promise<JobPage> {
    return listJobs(this.db, this.n, opts);
  }
  cancel(id: number): Promise<Job | null> {
    return cancelJob(this.db, this.n, id);
  }
  retry(id: number): Promise<Job | null> {
    return retryJob(this.db, this.n, id);
  }
  bulkCancel(filter: JobFilter): Promise<number> {
    return bulkCancel(this.db, this.n, filter);
  }
  bulkRetry(filter: JobFilter): Promise<number> {
    return bulkRetry(this.db, this.n, filter);
  }
  pauseQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.n, name, true);
  }
  resumeQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.n, name, false);
  }
  listQueues(): Promise<QueueInfo[]> {
    return listQueues(this.db, this.n);
  }
  queueKnown(name: string, liveWithinMs = 90_000): Promise<boolean> {
    return queueKnown(this.db, this.n, name, liveWithinMs);
  }
  registerCallback(
    id: number,
    lease: number,
    timeoutMs: number,
    kind: "in_process" | "http",
  ): Promise<string | null> {
    return registerCallback(this.db, this.n, id, lease, timeoutMs, kind);
  }
  getCallback(id: string): Promise<CallbackRecord | null> {
    return getCallback(this.db, this.n, id);
  }
  listCallbacks(jobId: number): Promise<CallbackRecord[]> {
    return listCallbacks(this.db, this.n, jobId);
  }
  resolveCallback(
    id: string,
    action: "complete" | "resume" | "fail" | "heartbeat",
    args: { payload?: unknown; error?: string; retryable?: boolean; timeoutSeconds?: number },
  ): Promise<CallbackResolution> {
    return this.resolutions.add({ id, action, ...args });
  }
  promote(): Promise<number> {
    return promoteDue(this.db, this.n);
  }
  rescue(rescueAfterMs: number): Promise<MaintainedJob[]> {
    return rescueStale(this.db, this.n, rescueAfterMs);
  }
  expireCallbacks(): Promise<MaintainedJob[]> {
    return expireCallbacks(this.db, this.n);
  }
  cleanup(retention: Retention): Promise<number> {
    return cleanupFinished(this.db, this.n, retention);
  }
  refreshStatistics(): Promise<boolean> {
    return refreshStatistics(this.db, this.n);
  }
  upsertRuntime(r: RuntimeReport): Promise<void> {
    return upsertRuntime(this.db, this.n, r);
  }
  deleteRuntime(id: string): Promise<void> {
    return deleteRuntime(this.db, this.n, id);
  }
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]> {
    return listRuntimes(this.db, this.n, liveWithinMs);
  }
  async storageState(): Promise<{ engine: string; transition: string }> {
    const rows = await this.db.query(`select engine, transition from ${this.n.q}.storage_state`);
    return rows.length ? { engine: rows[0].engine, transition: rows[0].transition } : {
      engine: "canonical",
      transition: "canonical",
    };
  }
}

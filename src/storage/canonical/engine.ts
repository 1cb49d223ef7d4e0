/**
 * The `canonical` storage engine: one jobs table updated in place, claims with `FOR UPDATE SKIP LOCKED`.
 * One file per SQL operation beside this one; this class only binds them to a pool and a schema. Reads
 * and admin changes of single jobs go through the stable SQL API (`shared/sql_api.ts`), which serves
 * both engines.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { Job, JobPage, ListJobsOptions, QueueInfo, RuntimeInfo } from "../../types.ts";
import type {
  AbandonedAttemptReport,
  AttemptRef,
  CallbackRecord,
  CallbackResolution,
  ClaimRequest,
  Completion,
  Failure,
  JobFilter,
  KindCounts,
  KindMinute,
  MaintainedJob,
  NewJob,
  ParkRequest,
  QueueDepth,
  ResolveAction,
  ResolveArgs,
  Retention,
  RingReport,
  RuntimeReport,
  StorageEngine,
  StorageState,
  ThroughputPoint,
} from "../engine.ts";
import { enqueueJobs } from "../shared/enqueue.ts";
import { DEPTH_CAP, readDepths, readKindMinute, SampleStore } from "../shared/samples.ts";
import { claimJobs } from "./claim.ts";
import { completeJobs } from "./complete.ts";
import { failJob, giveBack, heartbeatJobs, parkJobs, snoozeJob } from "./outcomes.ts";
import { bulkCancel, bulkRetry, deleteJob } from "./admin.ts";
import { countByKind, queueStats, throughput } from "./stats.ts";
import {
  cleanupFinished,
  expireCallbacks,
  promoteDue,
  refreshStatistics,
  rescueStale,
} from "./maintenance.ts";
import { queueDeclared, queuePaused, setQueuePaused } from "../shared/queues.ts";
import {
  type CallbackSql,
  getCallback,
  listCallbacks,
  registerCallback,
  resolveCallbacks,
  type ResolveRequest,
} from "../shared/callbacks.ts";
import { abandonedAttempts, deleteRuntime, listRuntimes, upsertRuntime } from "../shared/runtimes.ts";
import { cancelJob, getJob, listJobs, retryJob, runningJobs } from "../shared/sql_api.ts";
import { readStorageState } from "../shared/state.ts";
import { CronStore } from "../shared/cron.ts";
import { Batcher } from "../../db/batcher.ts";

/** The jobs-table engine. */
export class CanonicalEngine implements StorageEngine {
  readonly name = "canonical";
  readonly cron: CronStore;
  readonly samples: SampleStore;
  readonly callbackSql: CallbackSql;
  /** Parks and callback resolutions that arrive together are written together (group commit). */
  private readonly parks: Batcher<ParkRequest, boolean>;
  private readonly resolutions: Batcher<ResolveRequest, CallbackResolution>;

  constructor(
    private readonly db: Db,
    private readonly n: SchemaNames,
    private readonly liveWithinMs = 90_000,
  ) {
    this.cron = new CronStore(db, n);
    this.samples = new SampleStore(db, n, this);
    this.callbackSql = {
      table: `${n.q}.callbacks`,
      register: `${n.q}.register_callback`,
      resolveOne: `${n.q}.canonical_resolve_callback`,
      resolveBatch: `${n.q}.resolve_callbacks`,
    };
    this.parks = new Batcher(async (items) => {
      const parked = new Set(await parkJobs(db, n, items));
      return items.map((p) => parked.has(p.id));
    });
    this.resolutions = new Batcher((items) => resolveCallbacks(db, this.callbackSql, items));
  }

  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return enqueueJobs(db, this.n, jobs);
  }
  claim(req: ClaimRequest): Promise<Job[]> {
    return claimJobs(this.db, this.n, req);
  }
  giveBack(items: AttemptRef[]): Promise<number[]> {
    return giveBack(this.db, this.n, items);
  }
  complete(items: Completion[], keep: boolean): Promise<number[]> {
    return completeJobs(this.db, this.n, items, !keep);
  }
  async completeIn(db: Db, item: Completion, keep: boolean): Promise<boolean> {
    return (await completeJobs(db, this.n, [item], !keep)).length === 1;
  }
  fail(item: Failure): Promise<Job | null> {
    return failJob(this.db, this.n, item);
  }
  snooze(id: number, lease: number, delayMs: number): Promise<boolean> {
    return snoozeJob(this.db, this.n, id, lease, delayMs);
  }
  heartbeat(items: AttemptRef[]): Promise<void> {
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
  runningJobs(limit: number): Promise<Job[]> {
    return runningJobs(this.db, `${this.n.q}.jobs where state = 'running'`, limit);
  }
  cancel(id: number): Promise<Job> {
    return cancelJob(this.db, this.n, id);
  }
  retry(id: number): Promise<Job> {
    return retryJob(this.db, this.n, id);
  }
  deleteJob(id: number): Promise<Job> {
    return deleteJob(this.db, this.n, id);
  }
  bulkCancel(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return bulkCancel(this.db, this.n, filter, opts.dryRun);
  }
  bulkRetry(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return bulkRetry(this.db, this.n, filter, opts.dryRun);
  }
  pauseQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.n, name, true);
  }
  queuePaused(name: string): Promise<boolean> {
    return queuePaused(this.db, this.n, name);
  }
  resumeQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.n, name, false);
  }
  async queueKnown(name: string, liveWithinMs = this.liveWithinMs): Promise<boolean> {
    if (await queueDeclared(this.db, this.n, name, liveWithinMs)) return true;
    const rows = await this.db.query(`select 1 from ${this.n.q}.jobs where queue = $1 limit 1`, [name]);
    return rows.length > 0;
  }
  listQueues(): Promise<QueueInfo[]> {
    return queueStats(this.db, this.n);
  }
  async kindCounts(): Promise<KindCounts> {
    return { kinds: await countByKind(this.db, this.n), approximate: false };
  }
  throughput(minutes: number): Promise<ThroughputPoint[]> {
    return throughput(this.db, this.n, minutes);
  }
  queueDepths(): Promise<QueueDepth[]> {
    return readDepths(this.db, `${this.n.q}.canonical_queue_depths`, DEPTH_CAP);
  }
  kindMinute(minute: Date): Promise<KindMinute[]> {
    return readKindMinute(this.db, [`${this.n.q}.canonical_finished_attempts`], minute);
  }
  registerCallback(
    id: number,
    lease: number,
    timeoutMs: number,
    kind: "in_process" | "http",
  ): Promise<string | null> {
    return registerCallback(this.db, this.callbackSql, id, lease, timeoutMs, kind);
  }
  getCallback(id: string): Promise<CallbackRecord | null> {
    return getCallback(this.db, this.callbackSql, id);
  }
  listCallbacks(jobId: number): Promise<CallbackRecord[]> {
    return listCallbacks(this.db, this.callbackSql, jobId);
  }
  resolveCallback(id: string, action: ResolveAction, args: ResolveArgs): Promise<CallbackResolution> {
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
  maintainRing(): Promise<RingReport> {
    return Promise.resolve({ rotated: null, pruned: {}, moved: 0 });
  }
  abandonedAttempts(): Promise<AbandonedAttemptReport[]> {
    return abandonedAttempts(this.db, this.n);
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
  storageState(): Promise<StorageState> {
    return readStorageState(this.db, this.n);
  }
}

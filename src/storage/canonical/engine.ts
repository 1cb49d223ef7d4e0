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
  CallbackRegistration,
  CallbackResolution,
  Claimed,
  ClaimRequest,
  CompleteOptions,
  Completion,
  Failure,
  JobFilter,
  KindCounts,
  KindMinute,
  MaintainedJob,
  NewJob,
  Park,
  ParkRequest,
  QueueDepth,
  ResolveAction,
  ResolveArgs,
  Retention,
  RuntimeReport,
  Snooze,
  StorageEngine,
  StorageState,
  ThroughputPoint,
} from "../engine.ts";
import { enqueueJobs } from "../shared/enqueue.ts";
import { DEPTH_CAP, readDepths, readKindMinute, SampleStore } from "../shared/samples.ts";
import { claimJobs, claimLimited } from "./claim.ts";
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
import { queueDeclared, queueLimited, queuePaused, setQueuePaused } from "../shared/queues.ts";
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
    private readonly names: SchemaNames,
    private readonly liveWithinMs = 90_000,
  ) {
    this.cron = new CronStore(db, names);
    this.samples = new SampleStore(db, names, this);
    this.callbackSql = {
      table: `${names.q}.callbacks`,
      register: `${names.q}.register_callback`,
      resolveOne: `${names.q}.canonical_resolve_callback`,
      resolveBatch: `${names.q}.resolve_callbacks`,
    };
    this.parks = new Batcher(async (items) => {
      const parked = new Set(await parkJobs(db, names, items));
      return items.map((p) => parked.has(p.id));
    });
    this.resolutions = new Batcher((items) => resolveCallbacks(db, this.callbackSql, items));
  }

  enqueue(db: Db, jobs: NewJob[]): Promise<Job[]> {
    return enqueueJobs(db, this.names, jobs);
  }
  /**
   * Claims jobs. A limited queue's claims go through `claimLimited`; the plain claim claims nothing of a
   * limited queue, so an empty plain claim looks up (at most once a second per queue) whether the queue
   * became limited, and the limited claim finds out when it no longer is.
   */
  async claim(req: ClaimRequest): Promise<Claimed> {
    if (this.limitedQueues.has(req.queue)) {
      const r = await claimLimited(this.db, this.names, req);
      if (!r.limited) this.limitedQueues.delete(req.queue);
      return r.jobs;
    }
    const jobs = await claimJobs(this.db, this.names, req);
    if (jobs.length > 0) return jobs;
    const now = Date.now();
    if (now - (this.limitLookups.get(req.queue) ?? 0) < 1_000) return jobs;
    this.limitLookups.set(req.queue, now);
    if (!(await queueLimited(this.db, this.names, req.queue))) return jobs;
    this.limitedQueues.add(req.queue);
    return this.claim(req);
  }
  /** Queues found limited: their claims take the claim lock and the budget first. */
  private readonly limitedQueues = new Set<string>();
  /** When each queue was last looked up after an empty claim. */
  private readonly limitLookups = new Map<string, number>();
  giveBack(items: AttemptRef[]): Promise<number[]> {
    return giveBack(this.db, this.names, items);
  }
  complete(items: Completion[], opts: CompleteOptions): Promise<number[]> {
    return completeJobs(this.db, this.names, items, !opts.keepCompleted);
  }
  async completeIn(db: Db, item: Completion, opts: CompleteOptions): Promise<boolean> {
    return (await completeJobs(db, this.names, [item], !opts.keepCompleted)).length === 1;
  }
  fail(item: Failure): Promise<Job | null> {
    return failJob(this.db, this.names, item);
  }
  snooze(item: Snooze): Promise<boolean> {
    return snoozeJob(this.db, this.names, item.id, item.lease, item.delayMs);
  }
  heartbeat(items: AttemptRef[]): Promise<void> {
    return heartbeatJobs(this.db, this.names, items);
  }
  park(item: Park): Promise<boolean> {
    return this.parks.add({ id: item.id, lease: item.lease, callbackId: item.callbackId });
  }
  getJob(id: number): Promise<Job | null> {
    return getJob(this.db, this.names, id);
  }
  listJobs(opts: ListJobsOptions): Promise<JobPage> {
    return listJobs(this.db, this.names, opts);
  }
  runningJobs(limit: number): Promise<Job[]> {
    return runningJobs(this.db, `${this.names.q}.jobs where state = 'running'`, limit);
  }
  cancel(id: number): Promise<Job> {
    return cancelJob(this.db, this.names, id);
  }
  retry(id: number): Promise<Job> {
    return retryJob(this.db, this.names, id);
  }
  deleteJob(id: number): Promise<Job> {
    return deleteJob(this.db, this.names, id);
  }
  bulkCancel(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return bulkCancel(this.db, this.names, filter, opts.dryRun);
  }
  bulkRetry(filter: JobFilter, opts: { dryRun?: boolean } = {}): Promise<number> {
    return bulkRetry(this.db, this.names, filter, opts.dryRun);
  }
  pauseQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.names, name, true);
  }
  queuePaused(name: string): Promise<boolean> {
    return queuePaused(this.db, this.names, name);
  }
  resumeQueue(name: string): Promise<void> {
    return setQueuePaused(this.db, this.names, name, false);
  }
  async queueKnown(name: string, liveWithinMs = this.liveWithinMs): Promise<boolean> {
    if (await queueDeclared(this.db, this.names, name, liveWithinMs)) return true;
    const rows = await this.db.query(`select 1 from ${this.names.q}.jobs where queue = $1 limit 1`, [name]);
    return rows.length > 0;
  }
  listQueues(): Promise<QueueInfo[]> {
    return queueStats(this.db, this.names);
  }
  async kindCounts(): Promise<KindCounts> {
    return { kinds: await countByKind(this.db, this.names), approximate: false };
  }
  throughput(minutes: number): Promise<ThroughputPoint[]> {
    return throughput(this.db, this.names, minutes);
  }
  queueDepths(): Promise<QueueDepth[]> {
    return readDepths(this.db, `${this.names.q}.canonical_queue_depths`, DEPTH_CAP);
  }
  kindMinute(minute: Date): Promise<KindMinute[]> {
    return readKindMinute(this.db, [`${this.names.q}.canonical_finished_attempts`], minute);
  }
  registerCallback(r: CallbackRegistration): Promise<string | null> {
    return registerCallback(this.db, this.callbackSql, r.id, r.lease, r.timeoutMs, r.kind);
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
    return promoteDue(this.db, this.names);
  }
  rescue(rescueAfterMs: number): Promise<MaintainedJob[]> {
    return rescueStale(this.db, this.names, rescueAfterMs);
  }
  expireCallbacks(): Promise<MaintainedJob[]> {
    return expireCallbacks(this.db, this.names);
  }
  cleanup(retention: Retention): Promise<number> {
    return cleanupFinished(this.db, this.names, retention);
  }
  refreshStatistics(): Promise<boolean> {
    return refreshStatistics(this.db, this.names);
  }
  abandonedAttempts(): Promise<AbandonedAttemptReport[]> {
    return abandonedAttempts(this.db, this.names);
  }
  upsertRuntime(r: RuntimeReport): Promise<void> {
    return upsertRuntime(this.db, this.names, r);
  }
  deleteRuntime(id: string): Promise<void> {
    return deleteRuntime(this.db, this.names, id);
  }
  listRuntimes(liveWithinMs: number): Promise<RuntimeInfo[]> {
    return listRuntimes(this.db, this.names, liveWithinMs);
  }
  storageState(): Promise<StorageState> {
    return readStorageState(this.db, this.names);
  }
}

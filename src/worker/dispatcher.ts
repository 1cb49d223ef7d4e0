/**
 * One dispatcher per queue: it claims the queue's jobs and runs them in slots.
 *
 * Slots. The queue has `maxWorkers` slots in this process; `running` counts the slots taken: by an
 * attempt whose handler runs, and by a held job whose start is being recorded. A slot frees when the
 * handler settles; its completion is written later by the completer (`completer.ts`), so a slot never
 * waits for the database.
 *
 * Claim loops and reservations. `claimers` loops (default 1) claim concurrently, each taking at most its
 * share, `ceil(maxWorkers / claimers)`, of the free slots per claim. Before its claim goes out a loop
 * reserves the slots it claims into (`reserved`) and the prefetch room it asks for (`reservedAhead`), and
 * releases both when the claim returns (its jobs are then in `running` or in the buffer). Free slots are
 * `maxWorkers - running - reserved`, so claims in flight on several loops never take more jobs into slots
 * than there are slots, nor hold more than `prefetch`. A claim tells the engine how many of its jobs start
 * at once (`free`); the others come back marked `prefetched`.
 *
 * Prefetch (`prefetch`, default 0): a queue may also hold up to `prefetch` claimed jobs that have not started,
 * so that one claim carries many jobs. A prefetched job is `running` with its run lease and is heartbeated;
 * when a slot frees, its start is recorded (one batched statement for every queue's starts, with the
 * completions beside it) and its handler runs only after that write committed. While jobs are held, the loop
 * claims nothing into slots (the buffer fills them) and refills the buffer once it is half empty; after a
 * refill that came back short, the next one waits for a NOTIFY or the poll interval (freed slots still take
 * held jobs). A prefetched job that waited `prefetchTtl` (default 10 s) goes back to `available` without
 * consuming its attempt, and so do all of them when shutdown begins and when the queue is found paused (looked
 * up when a NOTIFY wakes the loop or a claim comes back empty, else every four poll intervals while jobs are
 * held; a freed slot does not look it up). After a crash, the leader gives back the ones that never started
 * (docs/reference/configuration.md, "Queues"; docs/guide/operations.md, "Prefetch").
 *
 * Yield. When a claim would fill only part of a share while attempts are still running (and nothing is
 * asked for the buffer), the loop first waits one macrotask, once: every attempt that settles in this
 * macrotask frees its slot, and one claim takes them all instead of one claim per freed slot.
 *
 * Waiting. A loop sleeps on its `Wakeup` for up to `pollInterval` (less when a held job's `prefetchTtl`
 * ends sooner) when it has nothing to claim into, and after a claim that came back short. It is woken by
 * NOTIFY of new jobs on its queue, by a pause, and by a freed slot when the last claim was full (more jobs
 * may be waiting) or jobs are held. A failed claim is retried after twice `pollInterval`, doubling with each
 * further failure up to 10 s.
 */
import type { AttemptRef, Claimed, KindPolicy, WorkerStore } from "../storage/engine.ts";
import type { Job, Logger, QueueLimit } from "../types.ts";
import { type AttemptHost, execute, type ExecutorDeps, type InFlight } from "./executor.ts";
import { sleep, Wakeup } from "../timing.ts";
import { nextMacrotask } from "../platform/platform.ts";
import { type CounterHandle, type HistogramHandle, timed } from "../metrics/registry.ts";
import { limitToSql } from "../storage/shared/limits.ts";
import { ValidationError } from "../errors.ts";

/** Per-queue settings. */
export interface QueueConfig {
  /** Jobs of this queue run at once in this process (default 10). */
  maxWorkers?: number;
  /** Claim loops (default 1). */
  claimers?: number;
  /** Claimed jobs held ready beyond the free slots (default 0: claim only into free slots). */
  prefetch?: number;
  /** How long a prefetched job may wait for a slot before it goes back, in ms (default 10 000). */
  prefetchTtl?: number;
  /**
   * Fleet-wide limits of the queue, seeded into the database when it has none for the queue (the stored
   * row wins: `svc queue limit`, the REST API and the UI change it for every process).
   */
  limit?: QueueLimit;
}

/** Largest `prefetch`. */
export const MAX_PREFETCH = 10_000;

/** What a dispatcher shares with the rest of its worker. */
export interface DispatcherContext {
  /** The executor's dependencies; the dispatcher uses their engine, logger, poll interval and job metrics. */
  deps: ExecutorDeps;
  /** Attempts in flight in the whole worker, by job id (shared by every queue's dispatcher). */
  inFlight: Map<number, InFlight>;
  /** This process's id in the runtimes table (stored with each claim). */
  runtimeId: string;
  /** The retry policy and deadline of each kind this worker runs (stored with each attempt at claim). */
  policies: () => Record<string, KindPolicy>;
  /** Kinds whose claim registers an HTTP callback, with its timeout in ms. */
  callbackTimeoutsMs?: Record<string, number>;
  /** Poll interval of this queue's claim loops in ms (default the executor's). */
  pollInterval?: number;
  /** Observes the run time of each claim statement (seconds). */
  claimTimer?: HistogramHandle;
  /** Counts this queue's claims that a limit cut short, by limit. */
  throttled?: (limit: string) => CounterHandle;
  /**
   * Whether a held job claimed at `claimedAt` may still start: false when this process's last successful
   * heartbeat is older than its stall threshold (the worker's: `rescueAfter` minus one heartbeat interval, at
   * least two intervals), or such a gap between heartbeats happened since the claim (a process resumed after
   * SIGSTOP, or cut off from the database): the leader may have rescued the attempt and claimed it again.
   */
  heldFresh?: (claimedAt: number) => boolean;
}

/** A prefetched job and when it was claimed. */
interface Held {
  job: Job;
  at: number;
}

export class Dispatcher implements AttemptHost {
  readonly maxWorkers: number;
  readonly claimers: number;
  readonly prefetch: number;
  readonly prefetchTtl: number;
  /** Most slots one claim loop takes at a time. */
  private readonly share: number;
  /** Slots reserved by claims in flight. */
  private reserved = 0;
  /** Prefetch room reserved by claims in flight. */
  private reservedAhead = 0;
  private stopping = false;
  private loops: Promise<void>[] = [];
  private readonly wakeups: Wakeup[] = [];
  /** Last time each claim loop went round. */
  private readonly ticks: number[] = [];
  /** Prefetched jobs, oldest first. */
  private buffer: Held[] = [];
  /**
   * At or before the claim time of every held job (Infinity: none held). Kept on each push and recomputed
   * when jobs leave by a filter, so that a freed slot or a loop round checks one time instead of every held
   * job: with 500 held, that check per started job was a tenth of the worker's CPU in a prefetch drain.
   */
  private heldSince = Infinity;
  /** Prefetched jobs that could not be given back yet (the database was away). */
  private toGiveBack: AttemptRef[] = [];
  private lastPauseCheck = 0;
  /** After a refill claim came back short, no refill before this time unless a NOTIFY wakes the loop. */
  private refillAfter = 0;
  /** A rate limit cut the last claim short: no claim before this time (a NOTIFY does not end the wait). */
  private throttledUntil = 0;
  /**
   * Attempts whose handler has returned (their slot is free) and whose outcome is not written yet: a
   * concurrency limit still counts them, so while one cuts this queue's claims short (`unitLimited`) their
   * slots are not claimed into until the outcome is written (a claim then would be cut short again).
   */
  private unwritten = 0;
  /** Outcomes of this queue's attempts written so far (a claim cut short while one was written retries). */
  private outcomesWritten = 0;
  /**
   * The queue has a concurrency or per-key limit whose claims take `ended` (its last claims said so): a
   * returned handler's unit is free for the next claim without waiting for its outcome to be written.
   */
  private countsUnits = false;
  /** With `countsUnits`: attempts (job id to lease) whose handler has returned and whose outcome is unwritten. */
  private readonly ended = new Map<number, number>();
  /** Handlers of this queue that have returned so far (with `countsUnits`, a claim cut short meanwhile retries). */
  private handlersReturned = 0;
  /** When a concurrency limit last cut a claim of this queue short (its units are counted for a second). */
  private unitLimitedAt = -Infinity;
  private get unitLimited(): boolean {
    return Date.now() - this.unitLimitedAt < 1_000;
  }
  /** The current wait after a claim a concurrency limit cut short (ms; 0 after one that was not). */
  private throttleBackoff = 0;
  /** The limit that cut this queue's claims short, since when; null once a claim was not cut short. */
  private throttledBy: { limit: string; since: Date } | null = null;

  /** Whether a limit cuts this queue's claims short now (the heartbeat reports it). */
  throttled(): { queue: string; limit: string; since: string } | null {
    return this.throttledBy
      ? { queue: this.queue, limit: this.throttledBy.limit, since: this.throttledBy.since.toISOString() }
      : null;
  }

  private readonly engine: WorkerStore;
  private readonly deps: ExecutorDeps;
  private readonly inFlight: Map<number, InFlight>;
  private readonly logger: Logger;
  private readonly pollInterval: number;

  constructor(readonly queue: string, cfg: QueueConfig, private readonly ctx: DispatcherContext) {
    this.deps = ctx.deps;
    this.engine = ctx.deps.engine;
    this.logger = ctx.deps.logger;
    this.inFlight = ctx.inFlight;
    this.pollInterval = ctx.pollInterval ?? ctx.deps.pollInterval;
    this.maxWorkers = cfg.maxWorkers ?? 10;
    this.claimers = cfg.claimers ?? 1;
    this.prefetch = cfg.prefetch ?? 0;
    this.prefetchTtl = cfg.prefetchTtl ?? 10_000;
    this.share = Math.ceil(this.maxWorkers / this.claimers);
    if (!Number.isInteger(this.maxWorkers) || this.maxWorkers < 1) {
      throw new ValidationError(`queues.${queue}.maxWorkers must be a positive integer`);
    }
    if (!Number.isInteger(this.claimers) || this.claimers < 1) {
      throw new ValidationError(`queues.${queue}.claimers must be a positive integer`);
    }
    if (!Number.isInteger(this.prefetch) || this.prefetch < 0 || this.prefetch > MAX_PREFETCH) {
      throw new ValidationError(`queues.${queue}.prefetch must be an integer from 0 to ${MAX_PREFETCH}`);
    }
    if (!Number.isFinite(this.prefetchTtl) || this.prefetchTtl < 100) {
      throw new ValidationError(`queues.${queue}.prefetchTtl must be at least 100 ms`);
    }
    if (cfg.limit !== undefined) {
      try {
        limitToSql(cfg.limit);
      } catch (e) {
        throw new ValidationError(`queues.${queue}.${(e as Error).message}`);
      }
    }
  }

  /** Attempts of this queue running now (or having their start recorded). */
  running = 0;
  /** The last claim filled everything it asked for, so more jobs may be waiting. */
  private backlog = false;

  /** Prefetched attempts held now (heartbeated like running ones). */
  held(): AttemptRef[] {
    return this.buffer.map((h) => ({ id: h.job.id, lease: h.job.lease }));
  }

  start(): void {
    for (let i = 0; i < this.claimers; i++) {
      this.wakeups.push(new Wakeup());
      this.ticks.push(Date.now());
      this.loops.push(this.loop(i));
    }
  }

  /**
   * A job of this queue may be available, or the queue was paused (both come as a NOTIFY on the queue's
   * channel): with jobs held, the loop looks up whether the queue is paused before it feeds them.
   */
  wake(): void {
    this.lastPauseCheck = 0;
    this.refillAfter = 0;
    this.slotFreed();
  }

  /**
   * A slot was freed: the loop feeds it from the buffer or claims. No pause lookup for this: a lookup per
   * freed slot was a round trip before every start batch (a pause is seen by its NOTIFY, by an empty
   * claim, or within four poll intervals).
   */
  private slotFreed(): void {
    this.wakeups.forEach((w) => w.notify());
  }

  /** Whether every claim loop went round within three poll intervals. */
  alive(now = Date.now()): boolean {
    return !this.stopping && this.ticks.every((t) => now - t < 3 * this.pollInterval + 1000);
  }

  /**
   * Stops claiming and gives the prefetched jobs back; resolves when the claim loops have exited (running
   * attempts go on).
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await Promise.all(this.loops);
    await this.giveBack(this.takeHeld(), "shutdown");
  }

  /** Gives prefetched jobs back (their attempt refunded, their run_at kept); keeps what could not be written for later. */
  private async giveBack(jobs: AttemptRef[], why: string): Promise<void> {
    const items = [...this.toGiveBack, ...jobs.map((j) => ({ id: j.id, lease: j.lease }))];
    this.toGiveBack = [];
    if (items.length === 0) return;
    try {
      await this.engine.giveBack(items);
      this.logger.debug(`svc: gave back ${items.length} prefetched jobs of queue ${this.queue} (${why})`);
    } catch (e) {
      this.toGiveBack = items;
      this.logger.error(
        `svc: could not give back ${items.length} prefetched jobs of queue ${this.queue}: ${
          (e as Error).message
        }`,
      );
    }
  }

  /**
   * Starts the handler of a claimed attempt in a slot already counted in `running`. The attempt leaves
   * `inFlight` (what the heartbeat keeps alive) once its outcome is recorded; its slot is freed once its
   * handler has returned too (an aborted handler may still run: src/worker/stuck.ts).
   */
  private run(job: Job): void {
    this.inFlight.set(job.id, execute(job, this.deps, this));
  }

  /** An attempt's slot is free (`AttemptHost`). */
  attemptSettled(a: InFlight): void {
    const job = a.job;
    this.running--;
    this.handlersReturned++;
    if (!a.outcomeWritten) {
      this.unwritten++;
      // Not running any more: the next claims tell the limit so until the outcome is written.
      if (this.countsUnits) this.ended.set(job.id, job.lease);
    }
    if (this.countsUnits && this.unitLimited) {
      // A unit of the queue's limit is free now: claim again at once.
      this.throttledUntil = 0;
      this.slotFreed();
    } else if (this.backlog || this.buffer.length) this.slotFreed();
  }

  /** An attempt's outcome is recorded (`AttemptHost`). */
  attemptRecorded(a: InFlight): void {
    if (this.inFlight.get(a.job.id) === a) this.inFlight.delete(a.job.id);
  }

  /** An attempt's outcome is committed or given up (`AttemptHost`). */
  attemptWritten(a: InFlight): void {
    const job = a.job;
    this.outcomesWritten++;
    if (a.slotFreed) {
      this.unwritten--;
      if (this.ended.get(job.id) === job.lease) this.ended.delete(job.id);
    }
    // Its outcome is committed: a unit of the queue's concurrency limit is free, claim again at once.
    if (this.unitLimited && !this.countsUnits) {
      this.throttledUntil = 0;
      this.slotFreed();
    }
  }

  /**
   * Moves held (prefetched) jobs into free slots: their handlers start at once. Their attempt was counted
   * when they were claimed; the start time travels with the outcome.
   */
  private feed(): void {
    const free = this.maxWorkers - this.running - this.reserved;
    if (free <= 0 || this.buffer.length === 0) return;
    const fresh = this.ctx.heldFresh;
    // Freshness only grows with the claim time: when the oldest time is fresh, every held job is.
    if (fresh && !fresh(this.heldSince)) {
      // Their attempts may have been rescued and run elsewhere (a stale one changes nothing when it ends,
      // but its handler's effects would happen twice, and a limit's unit would be used twice): none starts.
      const stale = this.buffer.filter((h) => !fresh(h.at)).map((h) => h.job);
      this.keepHeld((h) => fresh(h.at));
      if (stale.length) {
        this.logger.warn(
          `svc: ${stale.length} held jobs of queue ${this.queue} not started: this process went without a heartbeat for longer than rescueAfter allows since they were claimed (was it stopped?); giving them back`,
        );
        void this.giveBack(stale, "stalled past rescueAfter");
      }
      if (this.buffer.length === 0) return;
    }
    const batch = this.buffer.splice(0, free);
    if (this.buffer.length === 0) this.heldSince = Infinity;
    this.running += batch.length;
    for (const h of batch) {
      h.job.attemptedAt = new Date();
      this.run(h.job);
    }
  }

  /** Gives back prefetched jobs that waited `prefetchTtl`; returns ms until the next one would. */
  private async expire(): Promise<number> {
    if (this.buffer.length === 0 && this.toGiveBack.length === 0) return Infinity;
    const now = Date.now();
    if (now - this.heldSince >= this.prefetchTtl || this.toGiveBack.length) {
      const old = this.buffer.filter((h) => now - h.at >= this.prefetchTtl);
      this.keepHeld((h) => now - h.at < this.prefetchTtl);
      if (old.length || this.toGiveBack.length) {
        await this.giveBack(old.map((h) => h.job), `waited ${this.prefetchTtl} ms for a slot`);
      }
    }
    return this.buffer.length ? Math.max(0, this.heldSince + this.prefetchTtl - now) : Infinity;
  }

  /** Keeps the held jobs that pass `keep` and recomputes `heldSince`. */
  private keepHeld(keep: (h: Held) => boolean): void {
    this.buffer = this.buffer.filter(keep);
    this.heldSince = this.buffer.reduce((t, h) => Math.min(t, h.at), Infinity);
  }

  /** Takes every held job out of the buffer. */
  private takeHeld(): Job[] {
    this.heldSince = Infinity;
    return this.buffer.splice(0).map((h) => h.job);
  }

  /** With jobs held, whether the queue was paused (looked up when woken, else every few poll intervals). */
  private async pausedWhileHolding(): Promise<boolean> {
    if (this.buffer.length === 0 || Date.now() - this.lastPauseCheck < 4 * this.pollInterval) return false;
    this.lastPauseCheck = Date.now();
    try {
      return await this.engine.queuePaused(this.queue);
    } catch {
      return false;
    }
  }

  private async loop(i: number): Promise<void> {
    const wakeup = this.wakeups[i];
    let failures = 0;
    let yielded = false;
    while (!this.stopping) {
      this.ticks[i] = Date.now();
      const untilExpiry = await this.expire();
      if (await this.pausedWhileHolding()) {
        await this.giveBack(this.takeHeld(), "queue paused");
      }
      this.feed();
      // Returned handlers whose outcome is unwritten still hold a unit of a concurrency limit unless the
      // claim is told of them (countsUnits): until then their slots wait.
      const free = this.maxWorkers - this.running - this.reserved -
        (this.unitLimited && !this.countsUnits ? this.unwritten : 0);
      // Slots the buffer cannot fill are claimed into; the buffer is refilled once it is half empty.
      const intoSlots = this.buffer.length === 0 ? Math.min(Math.max(free, 0), this.share) : 0;
      const held = this.buffer.length + this.reservedAhead;
      const ahead = this.prefetch > 0 && held <= this.prefetch / 2 && Date.now() >= this.refillAfter
        ? this.prefetch - held
        : 0;
      if (intoSlots + ahead <= 0) {
        await wakeup.wait(Math.min(this.pollInterval, untilExpiry));
        continue;
      }
      const throttledFor = this.throttledUntil - Date.now();
      if (throttledFor > 0) {
        // Held jobs still start as slots free (the top of the loop feeds them); the loop goes round at
        // least every poll interval, so that it still counts as alive.
        await wakeup.wait(Math.min(this.pollInterval, untilExpiry, throttledFor));
        continue;
      }
      if (ahead === 0 && intoSlots < this.share && this.running > 0 && !yielded) {
        // Some attempts are still finishing: let everything that completes in this macrotask free its
        // slot first, so one claim takes them all instead of one claim per freed slot.
        yielded = true;
        await nextMacrotask();
        continue;
      }
      yielded = false;
      const limit = intoSlots + ahead;
      const writtenBefore = this.outcomesWritten;
      const returnedBefore = this.handlersReturned;
      this.reserved += intoSlots;
      this.reservedAhead += ahead;
      let claimed: Claimed;
      try {
        claimed = await timed(this.ctx.claimTimer, () =>
          this.engine.claim({
            queue: this.queue,
            limit,
            free: intoSlots,
            runtimeId: this.ctx.runtimeId,
            policies: this.ctx.policies(),
            callbackTimeoutsMs: this.ctx.callbackTimeoutsMs ?? {},
            prefetchTtlMs: this.prefetchTtl,
            ...(this.ended.size ? { ended: [...this.ended].map(([id, lease]) => ({ id, lease })) } : {}),
          }));
        failures = 0;
      } catch (e) {
        failures++;
        this.logger.error(`svc: claim on queue ${this.queue} failed: ${(e as Error).message}`);
        await sleep(Math.min(this.pollInterval * 2 ** failures, 10_000));
        continue;
      } finally {
        this.reserved -= intoSlots;
        this.reservedAhead -= ahead;
      }
      this.backlog = claimed.length >= limit;
      if (claimed.countsUnits) this.countsUnits = true;
      else if (!claimed.throttle && claimed.length > 0 && this.countsUnits) {
        this.countsUnits = false; // the queue's unit limit is gone
        this.ended.clear();
      }
      if (!claimed.throttle) {
        this.throttledBy = null;
        this.throttleBackoff = 0;
      }
      if (claimed.throttle) {
        // A limit cut the claim short (ADR 019): a rate has room again at retryAt; a unit of a concurrency
        // limit frees when an attempt of the queue ends (this process's own freed slot wakes the loop).
        const t = claimed.throttle;
        this.ctx.throttled?.(t.limit).inc();
        if (this.throttledBy?.limit !== t.limit) this.throttledBy = { limit: t.limit, since: new Date() };
        if (t.limit !== "rate") this.unitLimitedAt = Date.now();
        this.backlog = false;
        // A concurrency unit: retry after 25 ms, doubling up to the poll interval; this process's own freed
        // slot ends the wait at once (slotFreed).
        this.throttleBackoff = Math.min(
          this.pollInterval,
          this.throttleBackoff ? this.throttleBackoff * 2 : 25,
        );
        this.throttledUntil = t.retryAt
          ? Math.max(t.retryAt.getTime(), Date.now() + 1)
          : (this.countsUnits
              ? this.handlersReturned !== returnedBefore
              : this.outcomesWritten !== writtenBefore)
          ? 0 // a unit of this process's may have freed after the claim counted: ask again at once
          : Date.now() + this.throttleBackoff;
        this.logger.debug(
          `svc: queue ${this.queue} is limited (${t.limit}, ${t.inUse} in use); claiming again in ${
            this.throttledUntil - Date.now()
          } ms`,
        );
      }
      // A short refill: the queue had fewer jobs than asked. Freed slots take held jobs, but the next
      // refill waits for a NOTIFY or the poll interval instead of a claim per freed slot.
      if (ahead > 0 || this.backlog) this.refillAfter = this.backlog ? 0 : Date.now() + this.pollInterval;
      const now = Date.now();
      for (const job of claimed) {
        this.deps.jobMetrics(job).claimed.inc();
        if (job.prefetched) {
          this.buffer.push({ job, at: now });
          if (now < this.heldSince) this.heldSince = now;
        } else {
          this.running++;
          this.run(job);
        }
      }
      if (this.stopping) break;
      if (claimed.length === 0 && this.buffer.length) this.lastPauseCheck = 0; // an empty claim: paused?
      // Free slots take held jobs now; then a short claim waits (a freed slot or a NOTIFY wakes the loop)
      // instead of claiming again at once while jobs are held.
      this.feed();
      if (claimed.length < limit) {
        await wakeup.wait(Math.min(this.pollInterval, untilExpiry));
      }
    }
  }
}

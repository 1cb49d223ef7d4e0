/**
 * An in-memory fake of the worker's store (`WorkerStore` in `src/storage/engine.ts`: the attempt store, the
 * callbacks and two reads), what the worker runtime (dispatcher, executor, completer) uses: jobs in a map, claims, start records, give-backs,
 * completions, failures, snoozes, parks, heartbeats and paused queues. Every write carries (id, lease) and
 * changes nothing when the lease is no longer current, as in the real engines. Every call is logged in
 * `calls`; `faults` makes the next calls of a method throw; `delays` makes a method take that long.
 * Callback methods the tests here never reach throw "not in the fake".
 *
 * A claim counts the attempt of every job it returns, held (prefetched) or not; a give-back returns a
 * running job to `available` and refunds its attempt, as the engines do.
 */
import type {
  AttemptRef,
  CallbackRecord,
  CallbackResolution,
  Claimed,
  ClaimRequest,
  CompleteOptions,
  Completion,
  Failure,
  Park,
  Snooze,
  WorkerStore,
} from "../../src/storage/engine.ts";
import type { Job } from "../../src/types.ts";

/** A job of the fake, with whether its attempt's start is recorded. */
export interface FakeJob extends Job {
  started: boolean;
}

/** One call made to the fake. */
export interface FakeCall {
  method: string;
  args: unknown[];
}

function notInFake(method: string): never {
  throw new Error(`${method}: not in the fake engine`);
}

/** A job with defaults for every field. */
export function fakeJob(fields: Partial<Job> & { id: number }): FakeJob {
  return {
    kind: "k",
    queue: "q",
    args: {},
    state: "available",
    priority: 2,
    attempt: 0,
    maxAttempts: 25,
    effectiveMaxAttempts: null,
    runAt: new Date(0),
    createdAt: new Date(0),
    claimedAt: null,
    attemptedAt: null,
    finalizedAt: null,
    heartbeatAt: null,
    deadlineAt: null,
    errors: [],
    tags: [],
    metadata: {},
    result: null,
    uniqueKey: null,
    limitKey: null,
    callbackId: null,
    callbackTimeoutAt: null,
    lease: 0,
    attemptedBy: null,
    started: false,
    ...fields,
  };
}

export class FakeEngine implements WorkerStore {
  readonly name = "fake";
  readonly jobs = new Map<number, FakeJob>();
  readonly paused = new Set<string>();
  readonly calls: FakeCall[] = [];
  /** Errors the next calls of a method throw, first first. */
  readonly faults: Record<string, unknown[]> = {};
  /** Milliseconds a method waits before it acts. */
  readonly delays: Record<string, number> = {};
  /** Called at the start of every claim (after its delay), e.g. to check the dispatcher's counts. */
  onClaim: (req: ClaimRequest) => void = () => {};
  /**
   * A concurrency limit per queue, counted as queue storage counts it: the queue's running attempts except
   * those the claim names in `ended`; its claims answer `countsUnits` (and a throttle when cut short).
   */
  readonly unitLimits: Record<string, number> = {};
  /**
   * A completion whose result PostgreSQL would refuse: its whole statement throws this error (a data
   * error, as a result with an escape PostgreSQL cannot store does).
   */
  refuse: (c: Completion) => Error | null = () => null;
  private nextId = 1;

  /** Adds `n` available jobs (of `fields`, queue `q` and kind `k` by default); returns them. */
  add(n: number, fields: Partial<Job> = {}): FakeJob[] {
    const out: FakeJob[] = [];
    for (let i = 0; i < n; i++) {
      const job = fakeJob({ ...fields, id: this.nextId++ });
      this.jobs.set(job.id, job);
      out.push(job);
    }
    return out;
  }

  /** The calls of one method. */
  callsOf(method: string): unknown[][] {
    return this.calls.filter((c) => c.method === method).map((c) => c.args);
  }

  /** Jobs by state. */
  inState(state: string): FakeJob[] {
    return [...this.jobs.values()].filter((j) => j.state === state);
  }

  private async enter(method: string, ...args: unknown[]): Promise<void> {
    this.calls.push({ method, args });
    // A round trip to the database is never synchronous: at least one macrotask.
    await new Promise((r) => setTimeout(r, this.delays[method] ?? 0));
    const fault = this.faults[method];
    if (fault?.length) throw fault.shift();
  }

  /** The job when (id, lease) is its current running attempt. */
  private current(ref: AttemptRef): FakeJob | null {
    const j = this.jobs.get(ref.id);
    return j && j.lease === ref.lease && j.state === "running" ? j : null;
  }

  private copy(j: FakeJob): Job {
    const { started: _, ...job } = j;
    return structuredClone(job);
  }

  enqueue(): Promise<Job[]> {
    return notInFake("enqueue");
  }

  async claim(req: ClaimRequest): Promise<Claimed> {
    await this.enter("claim", req);
    this.onClaim(req);
    if (this.paused.has(req.queue)) return [];
    const unit = this.unitLimits[req.queue];
    let limit = req.limit;
    if (unit !== undefined) {
      const ended = new Set((req.ended ?? []).map((a) => `${a.id}:${a.lease}`));
      const open = [...this.jobs.values()]
        .filter((j) => j.queue === req.queue && j.state === "running" && !ended.has(`${j.id}:${j.lease}`))
        .length;
      limit = Math.max(0, Math.min(limit, unit - open));
    }
    const due = [...this.jobs.values()]
      .filter((j) => j.queue === req.queue && j.state === "available")
      .sort((a, b) => a.priority - b.priority || a.id - b.id)
      .slice(0, limit);
    const out: Claimed = due.map((j, i) => {
      j.state = "running";
      j.lease++;
      j.attempt++;
      j.attemptedBy = req.runtimeId;
      j.started = i < req.free;
      j.claimedAt = new Date();
      j.attemptedAt = j.started ? j.claimedAt : null;
      const job = this.copy(j);
      if (!j.started) job.prefetched = true;
      return job;
    });
    if (unit !== undefined) {
      out.countsUnits = true;
      if (limit < req.limit) out.throttle = { limit: "concurrency", inUse: unit, retryAt: null };
    }
    return out;
  }

  async giveBack(items: AttemptRef[]): Promise<number[]> {
    await this.enter("giveBack", items);
    const ids: number[] = [];
    for (const ref of items) {
      const j = this.current(ref);
      if (j && j.state === "running") {
        j.state = "available";
        j.attempt--;
        ids.push(j.id);
      }
    }
    return ids;
  }

  async complete(items: Completion[], opts: CompleteOptions): Promise<number[]> {
    await this.enter("complete", items, opts);
    return this.completeNow(items, opts.keepCompleted);
  }

  /** No database stands behind the fake: a completion inside a caller's transaction is refused. */
  completeIn(): Promise<boolean> {
    return Promise.reject(
      new Error("the fake engine has no transactions (ctx.transaction needs PostgreSQL)"),
    );
  }

  private completeNow(items: Completion[], keep: boolean): number[] {
    for (const c of items) {
      const refused = this.refuse(c);
      if (refused) throw refused;
    }
    const ids: number[] = [];
    for (const c of items) {
      const j = this.current(c);
      if (!j) continue;
      if (keep) {
        j.state = "completed";
        j.result = c.resultJson !== undefined ? JSON.parse(c.resultJson) : c.result ?? null;
        j.finalizedAt = new Date();
      } else this.jobs.delete(j.id);
      ids.push(j.id);
    }
    return ids;
  }

  async fail(item: Failure): Promise<Job | null> {
    await this.enter("fail", item);
    const j = this.current(item);
    if (!j) return null;
    const retry = !item.terminal && j.attempt < j.maxAttempts;
    j.state = retry ? "retryable" : "failed";
    j.errors.push({ attempt: j.attempt, at: new Date().toISOString(), error: item.error, terminal: !retry });
    if (!retry) j.finalizedAt = new Date();
    return this.copy(j);
  }

  async snooze({ id, lease, delayMs }: Snooze): Promise<boolean> {
    await this.enter("snooze", id, lease, delayMs);
    const j = this.current({ id, lease });
    if (!j) return false;
    j.state = "scheduled";
    j.attempt--;
    j.runAt = new Date(Date.now() + delayMs);
    return true;
  }

  async heartbeat(items: AttemptRef[]): Promise<void> {
    await this.enter("heartbeat", items);
    for (const ref of items) {
      const j = this.current(ref);
      if (j) j.heartbeatAt = new Date();
    }
  }

  async park({ id, lease, callbackId }: Park): Promise<boolean> {
    await this.enter("park", id, lease, callbackId);
    const j = this.current({ id, lease });
    if (!j || j.callbackId !== callbackId) return false;
    j.state = "waiting_external";
    return true;
  }

  async getJob(id: number): Promise<Job | null> {
    await this.enter("getJob", id);
    const j = this.jobs.get(id);
    return j ? this.copy(j) : null;
  }

  /** Cancels a job at once (as `svc job cancel` would); the fake sends no NOTIFY. */
  async cancel(id: number): Promise<Job> {
    await this.enter("cancel", id);
    const j = this.jobs.get(id);
    if (!j) throw new Error(`job ${id} not found`);
    j.state = "cancelled";
    j.finalizedAt = new Date();
    return this.copy(j);
  }

  async pauseQueue(name: string): Promise<void> {
    await this.enter("pauseQueue", name);
    this.paused.add(name);
  }

  async queuePaused(name: string): Promise<boolean> {
    await this.enter("queuePaused", name);
    return this.paused.has(name);
  }

  async resumeQueue(name: string): Promise<void> {
    await this.enter("resumeQueue", name);
    this.paused.delete(name);
  }

  registerCallback(): Promise<string | null> {
    return notInFake("registerCallback");
  }
  getCallback(): Promise<CallbackRecord | null> {
    return notInFake("getCallback");
  }
  listCallbacks(): Promise<CallbackRecord[]> {
    return notInFake("listCallbacks");
  }
  resolveCallback(): Promise<CallbackResolution> {
    return notInFake("resolveCallback");
  }
}

/** A Postgres-like error with a SQLSTATE (`code`). */
export function pgError(code: string, message = `error ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

/** Resolves when `cond()` holds, polling every few ms; throws after `ms`. */
export async function until(cond: () => boolean, what: string, ms = 2000): Promise<void> {
  // As `waitFor` (tests/helpers/db.ts): the timeout only decides how long a failing wait goes on.
  const end = Date.now() + Math.max(ms, 30_000);
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A promise with its resolve function (a latch a handler waits on). */
export function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

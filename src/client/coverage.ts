/**
 * Jobs nobody will run: available jobs in a queue that no live runtime serves, and jobs of a kind that
 * no live runtime serving their queue has a handler for. Runtimes report their queues and kinds in their
 * heartbeat (a runtime that does not report kinds counts as handling every kind). Read from the queue
 * counts, the kind counts and the runtimes table; a (queue, kind) pair is looked up only when some queue's
 * runtimes lack a handler for a kind that has available jobs, so a healthy fleet costs no job query.
 */
import type { Client } from "./client.ts";
import type { Job, QueueInfo, QueueLimitInfo, RuntimeInfo } from "../types.ts";

/** How a queue is covered by live runtimes. */
export interface QueueCoverage {
  queue: string;
  /** Live runtimes that serve it. */
  liveRuntimes: number;
  /** Available jobs (as the queue counts give them). */
  available: number;
  /** Kinds with available jobs in this queue that none of its live runtimes has a handler for. */
  unhandledKinds: string[];
}

/**
 * The coverage of every queue with available jobs or live runtimes, in name order. `queues` is the
 * caller's own `client.listQueues()` when it has one.
 */
export async function queueCoverage(
  client: Client,
  liveWithinMs = 90_000,
  queueList?: Promise<QueueInfo[]>,
): Promise<QueueCoverage[]> {
  const [queues, runtimes, kinds] = await Promise.all([
    queueList ?? client.listQueues(),
    client.engine.listRuntimes(liveWithinMs),
    client.engine.kindCounts(),
  ]);
  const live = runtimes.filter((r) => r.live);
  const availableKinds = kinds.kinds.filter((k) => k.counts.available > 0).map((k) => k.kind);
  const out: QueueCoverage[] = [];
  for (const q of queues) {
    const servers = live.filter((r) => r.queues.includes(q.name));
    const unhandledKinds: string[] = [];
    if (servers.length && q.counts.available > 0) {
      for (const kind of availableKinds) {
        if (servers.some((r) => handles(r, kind))) continue;
        const page = await client.listJobs({ state: "available", queue: q.name, kind, limit: 1 });
        if (page.jobs.length) unhandledKinds.push(kind);
      }
    }
    out.push({ queue: q.name, liveRuntimes: servers.length, available: q.counts.available, unhandledKinds });
  }
  return out.sort((a, b) => a.queue.localeCompare(b.queue));
}

/** Every queue (as `client.listQueues()` gives them) with its coverage, keyed by name. */
export async function queuesWithCoverage(
  client: Client,
  liveWithinMs = 90_000,
): Promise<{
  queues: QueueInfo[];
  coverage: QueueCoverage[];
  byName: Map<string, QueueCoverage>;
  /** Each queue's stored limits (queues without a limits row are absent). */
  limits: Map<string, QueueLimitInfo>;
}> {
  const list = client.listQueues();
  const [queues, coverage] = await Promise.all([list, queueCoverage(client, liveWithinMs, list)]);
  // After the others, not beside them: a request's statements stay within the few connections a small pool
  // has (through a transaction pooler, statements pipelined on one connection are a risk).
  const limits = await client.listQueueLimits();
  return {
    queues,
    coverage,
    byName: new Map(coverage.map((c) => [c.queue, c])),
    limits: new Map(limits.map((l) => [l.queue, l])),
  };
}

/** Why a job will not run when due, or null: no live runtime serves its queue, or none there handles its kind. */
export async function jobCoverage(client: Client, job: Job, liveWithinMs = 90_000): Promise<string | null> {
  if (!["available", "scheduled", "retryable"].includes(job.state)) return null;
  const servers = (await client.engine.listRuntimes(liveWithinMs)).filter((r) =>
    r.live && r.queues.includes(job.queue)
  );
  if (servers.length === 0) return `no live runtime serves queue ${job.queue}`;
  if (!servers.some((r) => handles(r, job.kind))) {
    return `none of the ${servers.length} live runtime(s) serving queue ${job.queue} has a handler for kind ${job.kind}`;
  }
  return null;
}

function handles(r: RuntimeInfo, kind: string): boolean {
  return r.kinds == null || r.kinds.includes(kind);
}

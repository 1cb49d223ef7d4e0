/**
 * `drain`: runs a worker on a client's database until its queues have no job that is available or
 * running, then stops it and returns the jobs it ran, as they ended up.
 */
import type { Client } from "../client/client.ts";
import { SvcError, ValidationError } from "../errors.ts";
import type { AnyTasks } from "../tasks.ts";
import type { Job } from "../types.ts";
import type { WorkerOptions } from "../worker/options.ts";
import { createWorker } from "../worker/worker.ts";
import { silentLogger } from "../worker/logger.ts";

/**
 * Options of `drain`: those of `createWorker` (handlers, schemas, HTTP workers, logger, events...) but
 * the client, and the queues as names.
 */
export interface DrainOptions<T extends object = AnyTasks>
  extends Omit<WorkerOptions<T>, "client" | "databaseUrl" | "driver" | "schema" | "queues"> {
  /** The queues to drain (default `["default"]`). */
  queues?: string[];
  /** Handlers running at once per queue (default 10). */
  maxWorkers?: number;
  /** Gives up after this many ms (default 30 000): the worker is stopped and `drain` rejects. */
  timeout?: number;
}

/**
 * Starts a worker on `client`'s database (quick timings, silent by default), lets it run until the queues
 * have no available or running job (follow-up jobs that are due now included; retries and snoozes due
 * later are left), stops it, and returns every job it ran as it ended up (`completed`, `failed`,
 * `retryable`, `scheduled`...), by id.
 */
export async function drain<T extends object = AnyTasks>(
  client: Client<T>,
  opts: DrainOptions<T> = {},
): Promise<Job[]> {
  const { queues = ["default"], maxWorkers = 10, timeout = 30_000, on = {}, ...rest } = opts;
  if (!Array.isArray(queues) || queues.length === 0) {
    throw new ValidationError("drain: queues must be a non-empty array of queue names");
  }
  if (!(Number.isFinite(timeout) && timeout > 0)) {
    throw new ValidationError("drain: timeout must be a positive number of milliseconds");
  }
  const ran = new Set<number>();
  const seen = (job: Job) => ran.add(job.id);
  const worker = createWorker<T>({
    pollInterval: 50,
    maintenanceInterval: 100,
    leaderElectionInterval: 200,
    logger: silentLogger,
    ...rest,
    client,
    schema: client.schema,
    queues: Object.fromEntries(queues.map((q) => [q, { maxWorkers }])),
    on: {
      ...on,
      completed: (j) => (seen(j), on.completed?.(j)),
      failed: (j, e) => (seen(j), on.failed?.(j, e)),
      retried: (j, e) => (seen(j), on.retried?.(j, e)),
      snoozed: (j, ms) => (seen(j), on.snoozed?.(j, ms)),
    },
  });
  await worker.start();
  const until = Date.now() + timeout;
  let drained = false;
  try {
    // Two quiet reads in a row: a job enqueued by a handler that just finished is counted by the second.
    let quiet = 0;
    while (Date.now() < until) {
      const busy = (await client.listQueues())
        .filter((q) => queues.includes(q.name))
        .reduce((n, q) => n + q.counts.available + q.counts.running, 0);
      quiet = busy === 0 ? quiet + 1 : 0;
      if (quiet >= 2) {
        drained = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await worker.shutdown(drained ? 5_000 : 0);
  }
  if (!drained) {
    throw new SvcError(
      `drain: the queues ${queues.join(", ")} were not drained within ${timeout} ms`,
      "timeout",
    );
  }
  const jobs = await Promise.all([...ran].sort((a, b) => a - b).map((id) => client.getJob(id)));
  return jobs.filter((j): j is Job => j !== null);
}

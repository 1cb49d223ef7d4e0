/** Test helpers for workers: fast timings, a silent logger, and guaranteed shutdown. */
import { createWorker, silentLogger, type Worker, type WorkerOptions } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";

/** Fast timings for tests. */
export const FAST = {
  pollInterval: 100,
  heartbeatInterval: 200,
  rescueAfter: 1_000,
  leaderElectionInterval: 200,
  maintenanceInterval: 50,
};

/** Starts a worker on the client's schema with fast timings; `stop` shuts it down (idempotent). */
export async function startWorker(
  client: Client,
  opts: Partial<WorkerOptions>,
): Promise<{ worker: Worker; stop: (drain?: number) => Promise<void> }> {
  const worker = createWorker({
    client,
    schema: client.schema,
    queues: { default: { maxWorkers: 5 } },
    logger: silentLogger,
    maxConnections: 10,
    ...FAST,
    ...opts,
  });
  await worker.start();
  return { worker, stop: (drain = 1000) => worker.shutdown(drain) };
}

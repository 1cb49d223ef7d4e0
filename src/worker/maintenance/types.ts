/** The types of the leader's duties (src/worker/maintenance/duties.ts) and their loop (maintenance.ts). */
import type { Retention, StorageEngine } from "../../storage/engine.ts";
import type { Logger } from "../../types.ts";
import type { WorkerEvents } from "../events.ts";
import type { SvcMetrics } from "../../metrics/svc_metrics.ts";

/** What duties get. */
export interface MaintenanceContext {
  engine: StorageEngine;
  logger: Logger;
  on: WorkerEvents;
  rescueAfter: number;
  retention: Retention;
  /** Queue storage: attempts running longer than this leave the ring. */
  parkAfter: number;
  /** The process's metrics (null with `metrics: false`). */
  metrics?: SvcMetrics | null;
}

/** A duty with its period. */
export interface Duty {
  name: string;
  everyMs: number;
  /** First run one period after this process became leader, not at once (housekeeping that can wait). */
  deferred?: boolean;
  run: (m: MaintenanceContext) => Promise<void>;
}

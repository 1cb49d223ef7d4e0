/**
 * Leader duty: running attempts with a stale heartbeat or a passed deadline are retried or failed, and
 * so are the attempts a live runtime names as given up on (its outcome write ran out of retries:
 * src/worker/abandoned.ts), through the engine's lease-fenced `fail` with the policy stored at claim.
 */
import type { MaintenanceContext } from "./types.ts";
import type { MaintainedJob } from "../../storage/engine.ts";
import { emit } from "../events.ts";
import { storableText } from "../../validation.ts";
import { describeThrown } from "../../describe.ts";
import { NotLeaderError } from "../../db/driver.ts";

export async function rescue(m: MaintenanceContext): Promise<void> {
  for (const job of await m.engine.rescue(m.rescueAfter)) rescued(m, job);
  for (const a of (await m.engine.abandonedAttempts?.()) ?? []) {
    const reason = `the worker ${a.runtimeId} gave up on the attempt (${a.reason})`;
    try {
      const after = await m.engine.fail({
        id: a.id,
        lease: a.lease,
        error: storableText(`rescued: ${reason}`),
        terminal: false,
      });
      if (after) rescued(m, { id: after.id, kind: after.kind, state: after.state, reason });
    } catch (e) {
      if (e instanceof NotLeaderError) throw e;
      // This one again at the next tick; the others go on.
      m.logger.error(`svc: could not rescue job ${a.id}: ${describeThrown(e)}`);
    }
  }
}

function rescued(m: MaintenanceContext, job: MaintainedJob): void {
  m.metrics?.f.svc_jobs_rescued_total.with(m.metrics.kindLabel(job.kind)).inc();
  m.logger.warn(`svc: rescued job ${job.id} (${job.kind}): ${job.reason}; now ${job.state}`);
  emit(m.on, m.logger, "rescued", job, job.reason);
}

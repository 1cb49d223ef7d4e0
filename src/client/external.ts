/** External completion of callbacks: resume (in-process waiter), complete, fail, heartbeat. */
import type { ResolveAction, ResolveArgs, StorageEngine } from "../storage/engine.ts";
import type { JobState } from "../types.ts";
import { CallbackNotFoundError, CallbackNotPendingError, ValidationError } from "../errors.ts";
import { checkJsonValue, checkText } from "../validation.ts";
import { isUuid } from "../contract/callback_url.ts";

/** What a resolution returns: the job and its state after the call (`timeoutAt` after heartbeat). */
export interface CallbackResult {
  jobId: number;
  callbackId: string;
  state: JobState;
  timeoutAt?: Date;
}

/**
 * Resolves a callback, mapping "not found" and "not pending" to their errors. A payload or error that
 * cannot be stored is a ValidationError before anything reaches SQL.
 */
export async function resolveExternal(
  engine: StorageEngine,
  callbackId: string,
  action: ResolveAction,
  args: ResolveArgs,
): Promise<CallbackResult> {
  if (typeof callbackId !== "string" || !isUuid(callbackId)) {
    throw new ValidationError(`callback id must be a UUID, got ${JSON.stringify(callbackId)}`);
  }
  // What PostgreSQL would refuse fails here, alone, instead of failing a batch of resolutions it shares.
  if (args.payload !== undefined) checkJsonValue("payload", args.payload);
  if (typeof args.error === "string") checkText("error", args.error);
  const r = await engine.resolveCallback(callbackId, action, args);
  if (r.outcome === "not_found") throw new CallbackNotFoundError(callbackId);
  if (r.outcome === "not_pending") throw new CallbackNotPendingError(callbackId, r.state);
  const out: CallbackResult = { jobId: r.jobId!, callbackId: callbackId.toLowerCase(), state: r.state! };
  if (r.timeoutAt) out.timeoutAt = r.timeoutAt;
  return out;
}

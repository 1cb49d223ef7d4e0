/** What both engines answer when a job cannot be deleted. */
import { InvalidStateError, JobNotFoundError } from "../../errors.ts";

/** JobNotFoundError when `state` is null, else InvalidStateError naming the state and the way out. */
export function notDeletable(id: number, state: string | null): Error {
  if (state === null) return new JobNotFoundError(id);
  return new InvalidStateError(
    `job ${id} is ${state}: only a completed, failed or cancelled job can be deleted (cancel it first)`,
  );
}

/**
 * `assertEnqueued`: asserts, against the database, that jobs of a kind were enqueued (inside a
 * transaction too, before it commits), matching the args and options given; returns them.
 */
import { AssertionError } from "node:assert";
import { isDeepStrictEqual } from "node:util";
import type { Client, ClientTransaction } from "../client/client.ts";
import type { Db } from "../db/connection.ts";
import { listJobs } from "../storage/shared/sql_api.ts";
import type { AnyTasks, TaskInput, TaskKind } from "../tasks.ts";
import type { EnqueuedJobOf, Job, JobState } from "../types.ts";
import { ValidationError } from "../errors.ts";

/** `T` with every property optional, recursively (arrays and other values whole). */
export type DeepPartial<T> = T extends readonly unknown[] ? T
  : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> }
  : T;

/** What the enqueued jobs must match: every field given (objects in part, arrays and values whole). */
export interface EnqueuedExpectation<Args = Record<string, unknown>> {
  /** Fields of the args: every one given must be there with this value (nested objects in part too). */
  args?: DeepPartial<Args>;
  queue?: string;
  priority?: number;
  /** The job's state, or one of these. */
  state?: JobState | JobState[];
  /** Tags the job must have (among others). */
  tags?: string[];
  /** Fields of the metadata, matched like `args`. */
  metadata?: Record<string, unknown>;
  /** Exactly this many jobs must match (default: at least one). */
  count?: number;
  /**
   * Look inside this transaction, which sees the jobs it enqueued before it commits: the `tx` of
   * `client.transaction`, or a transaction of your driver (as `enqueue`'s `tx` option takes it).
   */
  tx?: ClientTransaction<any> | unknown;
}

/** The kind's jobs looked at (the newest). */
const LOOKED_AT = 1000;

function partialMatch(actual: unknown, expected: unknown): boolean {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
  if (isObject(expected) && isObject(actual)) {
    return Object.entries(expected).every(([k, v]) => v === undefined || partialMatch(actual[k], v));
  }
  return isDeepStrictEqual(actual, expected);
}

function describe(job: Job): string {
  return `job ${job.id} (${job.state}, queue ${job.queue}, priority ${job.priority}) args ${
    JSON.stringify(job.args)
  }`;
}

/**
 * Asserts that jobs of `kind` matching `expect` are in the database (or in `expect.tx`); returns them,
 * newest first. Throws an `AssertionError` that lists the jobs of that kind it found otherwise. Looks at
 * the kind's 1000 newest jobs.
 */
export async function assertEnqueued<T extends object = AnyTasks, K extends TaskKind<T> = TaskKind<T>>(
  client: Client<T>,
  kind: K,
  expect: EnqueuedExpectation<TaskInput<T[K]>> = {},
): Promise<EnqueuedJobOf<T[K]>[]> {
  if (expect.count !== undefined && !(Number.isInteger(expect.count) && expect.count >= 0)) {
    throw new ValidationError("assertEnqueued: count must be an integer >= 0");
  }
  let db: Db = client.db;
  if (expect.tx !== undefined && expect.tx !== null) {
    const tx = expect.tx as Partial<ClientTransaction>;
    db = tx.db && typeof tx.db.query === "function" ? tx.db : client.driver.txDb(expect.tx);
  }
  const { jobs } = await listJobs(db, client.names, { kind, limit: LOOKED_AT });
  const states = expect.state === undefined ? null : [expect.state].flat();
  const matching = jobs.filter((j) =>
    (expect.args === undefined || partialMatch(j.args, expect.args)) &&
    (expect.queue === undefined || j.queue === expect.queue) &&
    (expect.priority === undefined || j.priority === expect.priority) &&
    (states === null || states.includes(j.state)) &&
    (expect.tags === undefined || expect.tags.every((t) => j.tags.includes(t))) &&
    (expect.metadata === undefined || partialMatch(j.metadata, expect.metadata))
  );
  const ok = expect.count === undefined ? matching.length > 0 : matching.length === expect.count;
  if (!ok) {
    const { tx: _tx, count, ...wanted } = expect;
    const found = jobs.length
      ? `; the ${kind} jobs there:\n${jobs.slice(0, 10).map((j) => `  ${describe(j)}`).join("\n")}` +
        (jobs.length > 10 ? `\n  ... and ${jobs.length - 10} more` : "")
      : `; there are no ${kind} jobs`;
    throw new AssertionError({
      message: `expected ${count === undefined ? "a job" : `${count} jobs`} of kind ${kind}` +
        (Object.keys(wanted).length ? ` matching ${JSON.stringify(wanted)}` : "") +
        `, found ${matching.length}${found}`,
    });
  }
  return matching as EnqueuedJobOf<T[K]>[];
}

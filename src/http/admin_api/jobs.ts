/**
 * Jobs: list (filters, text search in args, keyset pagination), enqueue, get with callbacks,
 * retry, cancel, delete (finished jobs, audited in the server log), bulk retry/cancel by filter, and bulk
 * retry/cancel/delete of named jobs (ids).
 */
import type { JobFilter } from "../../storage/engine.ts";
import { callbackToJson, jobToJson } from "../../wire.ts";
import { JOB_STATES, type JobState, TERMINAL_STATES } from "../../types.ts";
import {
  actionRoute,
  type ApiRoute,
  invalid,
  notFound,
  type Param,
  ref,
  route,
  type Schema,
} from "./route.ts";
import { queueNameSchema, stateSchema } from "./schemas.ts";
import { parseRfc3339 } from "../../validation.ts";
import { jobCoverage } from "../../client/coverage.ts";
import type { Client } from "../../client/client.ts";
import type { Job, Logger } from "../../types.ts";
import { InvalidStateError, JobNotFoundError } from "../../errors.ts";

const idParam: Param = {
  name: "id",
  in: "path",
  description: "job id",
  schema: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
};

const jobBody: Schema = { type: "object", required: ["job"], properties: { job: ref("Job") } };

/** Most ids one bulk request may name (each is one single-job action, one after the other). */
export const BULK_IDS_MAX = 500;

const idsSchema: Schema = {
  type: "array",
  items: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
  minItems: 1,
  maxItems: BULK_IDS_MAX,
  uniqueItems: true,
  description:
    `these jobs only (at most ${BULK_IDS_MAX}), instead of a filter: each is acted on alone, and ` +
    "one that is gone or in a state the action does not apply to is listed in skipped",
};

const dryRunSchema: Schema = {
  type: "boolean",
  description: "only count the jobs it would touch (D-16); nothing changes",
};

const bulkSchema: Schema = {
  type: "object",
  additionalProperties: false,
  properties: {
    state: stateSchema,
    kind: { type: "string", minLength: 1 },
    queue: queueNameSchema,
    ids: idsSchema,
    dry_run: dryRunSchema,
  },
};

const skippedSchema: Schema = {
  type: "array",
  description: "with ids: the ids not acted on, each with why (not_found or invalid_state)",
  items: {
    type: "object",
    required: ["id", "code", "error"],
    properties: {
      id: { type: "integer" },
      code: { type: "string", enum: ["not_found", "invalid_state"] },
      error: { type: "string" },
    },
  },
};

const countBody: Schema = {
  type: "object",
  required: ["count"],
  properties: {
    count: { type: "integer", description: "jobs acted on (with dry_run: that it would act on)" },
    skipped: skippedSchema,
  },
};

const NON_TERMINAL: readonly JobState[] = JOB_STATES.filter((s) => !TERMINAL_STATES.includes(s));

type BulkVerb = "retry" | "cancel" | "delete";
interface Skipped {
  id: number;
  code: "not_found" | "invalid_state";
  error: string;
}

/**
 * A bulk action on named jobs: one single-job action per id, in the order given (bounded by
 * {@link BULK_IDS_MAX}). A dry run reads each job and counts those in a state the action applies to.
 */
async function actOnIds(
  client: Client,
  verb: BulkVerb,
  ids: number[],
  allowed: readonly JobState[],
  dryRun: boolean,
  audit: (job: Job) => void,
): Promise<{ count: number; skipped: Skipped[] }> {
  const skipped: Skipped[] = [];
  let count = 0;
  for (const id of ids) {
    if (dryRun) {
      const job = await client.getJob(id);
      if (!job) skipped.push({ id, code: "not_found", error: `job ${id} not found` });
      else if (!allowed.includes(job.state)) {
        skipped.push({
          id,
          code: "invalid_state",
          error: `job ${id} is ${job.state}: ${verb} does not apply`,
        });
      } else count++;
      continue;
    }
    try {
      if (verb === "retry") await client.retry(id);
      else if (verb === "cancel") await client.cancel(id);
      else audit(await client.deleteJob(id));
      count++;
    } catch (e) {
      if (e instanceof JobNotFoundError) skipped.push({ id, code: "not_found", error: e.message });
      else if (e instanceof InvalidStateError) skipped.push({ id, code: "invalid_state", error: e.message });
      else throw e;
    }
  }
  return { count, skipped };
}

/** The audit line of a job deleted through the admin API. */
function auditDelete(logger: Pick<Logger, "info">, job: Job): void {
  logger.info(
    `svc: audit: job ${job.id} deleted through the admin API (kind ${job.kind}, queue ${job.queue}, ` +
      `${job.state}, attempt ${job.attempt}, created ${job.createdAt.toISOString()})`,
  );
}

/**
 * `POST /jobs/bulk-<verb>`: with `ids`, those jobs one by one; otherwise (retry and cancel) the jobs a
 * filter matches, in one statement. A state the action never applies to is a 400.
 */
function bulkRoute(verb: BulkVerb, summary: string, allowed: readonly JobState[]): ApiRoute {
  const byFilter = verb !== "delete";
  return route({
    method: "POST",
    path: `/jobs/bulk-${verb}`,
    operationId: `bulk${verb[0].toUpperCase()}${verb.slice(1)}Jobs`,
    summary,
    tag: "jobs",
    mutates: true,
    body: byFilter ? bulkSchema : {
      type: "object",
      required: ["ids"],
      additionalProperties: false,
      properties: { ids: idsSchema, dry_run: dryRunSchema },
    },
    response: countBody,
    errors: ["invalid_request"],
    async handler({ client, body, logger }) {
      const b = body as {
        state?: JobState;
        kind?: string;
        queue?: string;
        ids?: number[];
        dry_run?: boolean;
      };
      const dryRun = b.dry_run === true;
      if (b.ids !== undefined) {
        if (b.state !== undefined || b.kind !== undefined || b.queue !== undefined) {
          throw invalid(`bulk-${verb} takes ids or a filter (state, kind, queue), not both`);
        }
        return await actOnIds(client, verb, b.ids, allowed, dryRun, (job) => auditDelete(logger, job));
      }
      if (b.state !== undefined && !allowed.includes(b.state)) {
        throw invalid(
          `bulk-${verb} applies to jobs that are ${allowed.join(", ")}; state ${b.state} matches none`,
        );
      }
      const f: JobFilter = {};
      if (b.state !== undefined) f.state = b.state;
      if (b.kind !== undefined) f.kind = b.kind;
      if (b.queue !== undefined) f.queue = b.queue;
      const o = { dryRun };
      return { count: await (verb === "retry" ? client.bulkRetry(f, o) : client.bulkCancel(f, o)) };
    },
  });
}

export const jobRoutes = [
  route({
    method: "GET",
    path: "/jobs",
    operationId: "listJobs",
    summary: "List jobs, newest first, filtered; keyset pagination with next_cursor",
    tag: "jobs",
    mutates: false,
    params: [
      { name: "state", in: "query", description: "only jobs in this state", schema: stateSchema },
      {
        name: "kind",
        in: "query",
        description: "only jobs of this kind",
        schema: { type: "string", maxLength: 255 },
      },
      { name: "queue", in: "query", description: "only jobs of this queue", schema: queueNameSchema },
      { name: "tag", in: "query", description: "only jobs carrying this tag", schema: { type: "string" } },
      {
        name: "q",
        in: "query",
        description: "case-insensitive text searched for in the args (as JSON text)",
        schema: { type: "string", maxLength: 200 },
      },
      {
        name: "limit",
        in: "query",
        description: "page size (default 50)",
        schema: { type: "integer", minimum: 1, maximum: 1000, default: 50 },
      },
      {
        name: "cursor",
        in: "query",
        description: "next_cursor of the previous page",
        schema: { type: "string", maxLength: 100 },
      },
    ],
    response: {
      type: "object",
      required: ["jobs", "next_cursor"],
      properties: {
        jobs: { type: "array", items: ref("Job") },
        next_cursor: { type: ["string", "null"], description: "opaque; null on the last page" },
      },
    },
    errors: ["invalid_request"],
    async handler({ client, query }) {
      const page = await client.listJobs({
        state: query.state as JobState | undefined,
        kind: query.kind as string | undefined,
        queue: query.queue as string | undefined,
        tag: query.tag as string | undefined,
        q: query.q as string | undefined,
        limit: (query.limit as number | undefined) ?? 50,
        cursor: query.cursor as string | undefined,
      });
      return { jobs: page.jobs.map(jobToJson), next_cursor: page.nextCursor };
    },
  }),
  route({
    method: "POST",
    path: "/jobs",
    operationId: "enqueueJob",
    summary: "Enqueue a job",
    tag: "jobs",
    mutates: true,
    body: {
      type: "object",
      required: ["kind"],
      additionalProperties: false,
      properties: {
        kind: { type: "string", minLength: 1, maxLength: 255 },
        args: { type: "object", description: "default {}" },
        queue: { ...queueNameSchema, description: "default `default`" },
        priority: { type: "integer", minimum: 1, maximum: 4, description: "1 (highest) to 4, default 2" },
        run_at: {
          type: "string",
          format: "date-time",
          description: "RFC 3339; in the future makes it scheduled",
        },
        max_attempts: { type: "integer", minimum: 1, maximum: 1000, description: "default 25" },
        tags: { type: "array", items: { type: "string" } },
        metadata: { type: "object" },
        unique: {
          type: "object",
          additionalProperties: false,
          description: "unique job: key over kind (+ args) (+ queue) (+ time period)",
          properties: {
            by_args: { type: "boolean", description: "default true" },
            by_queue: { type: "boolean", description: "default false" },
            period_seconds: { type: "integer", minimum: 1 },
            on_conflict: {
              type: "string",
              enum: ["return", "error"],
              description:
                "return (default): answer the existing job with duplicate true; error: 409 unique_conflict",
            },
          },
        },
        limit_key: {
          type: "string",
          minLength: 1,
          maxLength: 255,
          description: "the key per-key limits count the job by (carried with the job; not enforced yet)",
        },
      },
    },
    status: 201,
    response: jobBody,
    errors: ["invalid_request", "unique_conflict"],
    async handler({ client, body }) {
      const b = body as {
        kind: string;
        args?: Record<string, unknown>;
        queue?: string;
        priority?: number;
        run_at?: string;
        max_attempts?: number;
        tags?: string[];
        metadata?: Record<string, unknown>;
        unique?: {
          by_args?: boolean;
          by_queue?: boolean;
          period_seconds?: number;
          on_conflict?: "return" | "error";
        };
        limit_key?: string;
      };
      const job = await client.enqueue(b.kind, b.args ?? {}, {
        queue: b.queue,
        priority: b.priority,
        runAt: b.run_at === undefined ? undefined : parseRfc3339(b.run_at)!, // checked by the schema
        maxAttempts: b.max_attempts,
        tags: b.tags,
        metadata: b.metadata,
        unique: b.unique && {
          byArgs: b.unique.by_args,
          byQueue: b.unique.by_queue,
          periodMs: b.unique.period_seconds === undefined ? undefined : b.unique.period_seconds * 1000,
          onConflict: b.unique.on_conflict,
        },
        limitKey: b.limit_key,
      });
      return { job: jobToJson(job) };
    },
  }),
  bulkRoute("retry", "Retry every completed, failed or cancelled job matching the filter", TERMINAL_STATES),
  bulkRoute("cancel", "Cancel every unfinished job matching the filter", NON_TERMINAL),
  bulkRoute(
    "delete",
    "Delete the completed, failed or cancelled jobs named by ids (audited)",
    TERMINAL_STATES,
  ),
  route({
    method: "GET",
    path: "/jobs/:id",
    operationId: "getJob",
    summary: "One job, with every attempt's error and its callbacks",
    tag: "jobs",
    mutates: false,
    params: [idParam],
    response: {
      type: "object",
      required: ["job", "callbacks"],
      properties: {
        job: ref("Job"),
        callbacks: { type: "array", items: ref("Callback") },
        unserved: {
          type: ["string", "null"],
          description: "why the job will not run when due (no live runtime serves its queue, or none there " +
            "has a handler for its kind); null when it will, or when it is not waiting to run",
        },
      },
    },
    errors: ["invalid_request", "not_found"],
    async handler({ client, params }) {
      const id = params.id as number;
      const job = await client.getJob(id);
      if (!job) throw notFound(`job ${id} not found`);
      const [callbacks, unserved] = await Promise.all([client.listCallbacks(id), jobCoverage(client, job)]);
      return { job: jobToJson(job), callbacks: callbacks.map(callbackToJson), unserved };
    },
  }),
  route({
    method: "DELETE",
    path: "/jobs/:id",
    operationId: "deleteJob",
    summary: "Delete a completed, failed or cancelled job and its callbacks; answers the job as it was",
    tag: "jobs",
    mutates: true,
    params: [idParam],
    response: jobBody,
    errors: ["invalid_request", "not_found", "invalid_state"],
    async handler({ client, params, logger }) {
      const job = await client.deleteJob(params.id as number);
      auditDelete(logger, job);
      return { job: jobToJson(job) };
    },
  }),
  actionRoute({
    collection: "jobs",
    param: idParam,
    verb: "retry",
    operationId: "retryJob",
    summary: "Retry a completed, failed or cancelled job now (attempt reset to 0, errors kept)",
    response: jobBody,
    errors: ["invalid_request", "not_found", "invalid_state"],
    run: async ({ client }, id) => ({ job: jobToJson(await client.retry(id as number)) }),
  }),
  actionRoute({
    collection: "jobs",
    param: idParam,
    verb: "cancel",
    operationId: "cancelJob",
    summary: "Cancel a job that has not finished (a running handler is told through its abort signal)",
    response: jobBody,
    errors: ["invalid_request", "not_found", "invalid_state"],
    run: async ({ client }, id) => ({ job: jobToJson(await client.cancel(id as number)) }),
  }),
];

/**
 * JSON schemas of the admin API's shared objects (`docs/reference/rest.md`), referenced by the routes
 * and published under `components.schemas` of `/api/openapi.json`.
 */
import { JOB_STATES } from "../../types.ts";
import { QUEUE_NAME_RE } from "../../client/enqueue_input.ts";
import { STATUS_BY_CODE } from "../errors.ts";
import type { Param, Schema } from "./route.ts";

const time: Schema = { type: "string", format: "date-time" };
const timeOrNull: Schema = { type: ["string", "null"], format: "date-time" };
const int: Schema = { type: "integer" };

/** Job state names, lowercase. */
export const stateSchema: Schema = { type: "string", enum: JOB_STATES };

/** Queue names: 1 to 48 characters of `A-Z a-z 0-9 _ . -`. */
export const queueNameSchema: Schema = { type: "string", pattern: QUEUE_NAME_RE.source };

/** A job kind in a query filter. */
export const kindFilterSchema: Schema = { type: "string", maxLength: 255 };

/** A query parameter. */
export function queryParam(name: string, description: string, schema: Schema): Param {
  return { name, in: "query", description, schema };
}

/** Every component schema, by name. */
export const SCHEMAS: Record<string, Schema> = {
  Error: {
    type: "object",
    required: ["error", "code"],
    properties: {
      error: { type: "string", description: "message for people" },
      code: {
        type: "string",
        description: "stable machine-readable code",
        enum: Object.keys(STATUS_BY_CODE),
      },
    },
  },
  StateCounts: {
    type: "object",
    description: "a count for each of the 8 job states",
    required: [...JOB_STATES],
    properties: Object.fromEntries(JOB_STATES.map((s) => [s, int])),
  },
  JobError: {
    type: "object",
    required: ["attempt", "at", "error"],
    properties: {
      attempt: int,
      at: time,
      error: { type: "string", description: "the error's message" },
      terminal: { type: "boolean" },
      stack: {
        type: "string",
        description:
          "at most 8 KB: the handler's stack, an HTTP function's status and answer, or a rescue's reason",
      },
    },
  },
  Job: {
    type: "object",
    properties: {
      id: int,
      kind: { type: "string" },
      queue: { type: "string" },
      args: { type: "object" },
      state: stateSchema,
      priority: { type: "integer", minimum: 1, maximum: 4 },
      attempt: int,
      max_attempts: int,
      effective_max_attempts: {
        type: ["integer", "null"],
        description: "the limit that applied to the latest attempt (the smaller of the job's and its kind's)",
      },
      run_at: time,
      created_at: time,
      claimed_at: {
        ...timeOrNull,
        description:
          "when the latest attempt was claimed (held, prefetched jobs too); null before the first claim",
      },
      attempted_at: {
        ...timeOrNull,
        description:
          "when the latest attempt's handler started, written with its outcome; null while an attempt runs",
      },
      finalized_at: timeOrNull,
      heartbeat_at: timeOrNull,
      deadline_at: timeOrNull,
      errors: { type: "array", items: { $ref: "#/components/schemas/JobError" } },
      tags: { type: "array", items: { type: "string" } },
      metadata: { type: "object" },
      result: { description: "the complete payload or the handler's return value (any JSON)" },
      unique_key: { type: ["string", "null"] },
      limit_key: {
        type: ["string", "null"],
        description:
          "the key per-key limits count the job by (set at enqueue, kept for its whole life); null: none",
      },
      callback_id: { type: ["string", "null"], format: "uuid" },
      callback_timeout_at: timeOrNull,
      attempted_by: { type: ["string", "null"] },
      lease: { type: "integer", description: "run lease of the latest claim" },
      duplicate: {
        type: "boolean",
        description: "set on enqueue when a unique job with the key already existed",
      },
      progress: {
        type: "object",
        required: ["value", "at"],
        properties: { value: { description: "any JSON, at most 4 KB serialized" }, at: time },
        description:
          "present when the handler of the latest attempt reported progress (ctx.progress): the latest value and when it was written",
      },
    },
  },
  Callback: {
    type: "object",
    properties: {
      id: { type: "string", format: "uuid" },
      attempt: int,
      kind: { type: "string", enum: ["in_process", "http"] },
      state: { type: "string", enum: ["pending", "completed", "failed", "expired", "superseded"] },
      deadline_at: timeOrNull,
      created_at: time,
      resolved_at: timeOrNull,
      error: { type: ["string", "null"] },
      rejected_count: { type: "integer", description: "refused requests that named this callback" },
      last_rejection: {
        type: ["object", "null"],
        description: "the last refused request: {status, code, at}",
      },
    },
  },
  Queue: {
    type: "object",
    properties: {
      name: { type: "string" },
      paused: { type: "boolean" },
      counts: { $ref: "#/components/schemas/StateCounts" },
      approximate: {
        type: "array",
        items: { type: "string" },
        description: "states whose count is a lower bound",
      },
      oldest_available_age_seconds: { type: ["number", "null"] },
      live_runtimes: {
        type: "integer",
        description: "live runtimes that serve the queue",
      },
      unhandled_kinds: {
        type: "array",
        items: { type: "string" },
        description: "kinds with available jobs here that none of those runtimes has a handler for",
      },
      limit: {
        oneOf: [{ $ref: "#/components/schemas/QueueLimit" }, { type: "null" }],
        description: "the queue's fleet-wide limits and their use; null when it has no limits row",
      },
    },
  },
  QueueLimit: {
    type: "object",
    properties: {
      concurrency: { type: ["integer", "null"], description: "at most this many attempts open at once" },
      rate: { type: ["integer", "null"], description: "at most this many claims in any window of per_ms" },
      per_ms: { type: ["integer", "null"], description: "the rate's window in milliseconds" },
      per_key: { type: ["integer", "null"], description: "at most this many attempts open per limit key" },
      count_parked: { type: "boolean", description: "attempts parked for an HTTP callback hold a unit" },
      rate_in_force_at: {
        type: ["string", "null"],
        format: "date-time",
        description: "a rate counts claims from when it was set and is enforced one window later",
      },
      in_use: {
        type: "object",
        properties: {
          rate: { type: ["integer", "null"], description: "jobs claimed in the current window" },
          concurrency: { type: ["integer", "null"], description: "attempts open now" },
          per_key: {
            type: ["object", "null"],
            additionalProperties: { type: "integer" },
            description: "the units each limit key holds now (keys holding none are left out)",
          },
        },
      },
      set_by: {
        type: "string",
        description: "cli, api, ui, client, sql, or the id of the runtime that seeded it",
      },
      updated_at: { type: "string", format: "date-time" },
    },
  },
  Cron: {
    type: "object",
    properties: {
      name: { type: "string" },
      schedule: { type: "string" },
      kind: { type: "string" },
      args: { type: "object" },
      queue: { type: "string" },
      timezone: { type: "string" },
      paused: { type: "boolean" },
      last_fire_at: timeOrNull,
      next_fire_at: timeOrNull,
      priority: { type: "integer", minimum: 1, maximum: 4 },
      max_attempts: int,
      tags: { type: "array", items: { type: "string" } },
      metadata: { type: "object" },
      catch_up: {
        type: "integer",
        description: "missed fires enqueued after downtime; 0 coalesces them into one",
      },
      declared_by: {
        type: ["string", "null"],
        description: "the runtime id of the worker that declared it, or cli",
      },
      created_at: time,
      updated_at: time,
      synced_at: { ...time, description: "last time a worker (or svc cron add) declared it" },
    },
  },
  Runtime: {
    type: "object",
    properties: {
      id: { type: "string" },
      hostname: { type: "string" },
      pid: int,
      queues: { type: "array", items: { type: "string" } },
      engines: { type: "array", items: { type: "string" }, description: "storage engines it can execute" },
      ready: { type: "boolean" },
      leader: { type: "boolean" },
      started_at: time,
      heartbeat_at: time,
      live: { type: "boolean", description: "heartbeated within 3 heartbeat intervals" },
      rescue_after_ms: {
        type: ["integer", "null"],
        description: "the rescue window it reported: an attempt without a heartbeat for longer is rescued",
      },
      in_flight: { type: ["integer", "null"], description: "attempts it was running at its last heartbeat" },
      held: {
        type: ["integer", "null"],
        description:
          "jobs it held claimed and not started (prefetched; their state is running) at its last " +
          "heartbeat; null for processes that do not report them",
      },
      held_jobs: {
        type: "array",
        items: { type: "integer" },
        description: "ids of those held jobs (at most 500)",
      },
      throttled: {
        type: "array",
        description: "its queues whose last claim a fleet-wide limit cut short, at its last heartbeat",
        items: {
          type: "object",
          properties: {
            queue: { type: "string" },
            limit: { type: "string", enum: ["rate", "concurrency", "per_key"] },
            since: time,
          },
        },
      },
      stuck_handlers: {
        type: "array",
        description:
          "handlers aborted (cancel, deadline, shutdown) that had not returned within the stuck grace " +
          "at its last heartbeat; each keeps its slot until it returns",
        items: {
          type: "object",
          properties: {
            job_id: { type: "integer" },
            lease: { type: "integer" },
            kind: { type: "string" },
            queue: { type: "string" },
            reason: { type: "string", enum: ["cancelled", "deadline", "shutdown"] },
            aborted_at: time,
          },
        },
      },
      kinds: {
        type: ["array", "null"],
        items: { type: "string" },
        description: "the kinds it has a handler for; null for a process that does not report them",
      },
    },
  },
};

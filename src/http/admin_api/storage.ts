/** Storage: the engine new writes go to and the storage transition, with its blockers and next step. */
import { route } from "./route.ts";

export const storageRoutes = [
  route({
    method: "GET",
    path: "/storage",
    operationId: "getStorage",
    summary: "The storage engine and transition: state, backlog left in canonical, runtimes by engine, " +
      "what blocks the next step, whether abort is possible, the next step",
    tag: "storage",
    mutates: false,
    response: {
      type: "object",
      required: ["state", "engine", "canonical_backlog", "blockers", "abort_possible", "next_step"],
      properties: {
        state: { type: "string", enum: ["canonical", "prepared", "mixed_transition", "active"] },
        transition: { type: "string", description: "the same as state" },
        engine: { type: "string", description: "where new writes go: canonical or queue_storage" },
        prepared_engine: { type: ["string", "null"] },
        canonical_backlog: { type: "integer", description: "unfinished jobs still in the canonical table" },
        queue_storage_ready: { type: "boolean", description: "every queue-storage object is installed" },
        queue_storage_schema: { type: ["string", "null"] },
        runtimes: {
          type: "object",
          properties: { canonical_only: { type: "integer" }, queue_storage_capable: { type: "integer" } },
        },
        blockers: { type: "array", items: { type: "string" } },
        abort_possible: { type: "boolean" },
        next_step: { type: ["string", "null"], description: "the command of the next step" },
      },
    },
    errors: [],
    handler: ({ client }) => client.storageStatus(),
  }),
];

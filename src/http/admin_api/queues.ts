/** Queues: list with counts by state, pause, resume. */
import type { Client } from "../../client/client.ts";
import { queueToJson } from "../../wire.ts";
import { queuesWithCoverage } from "../../client/coverage.ts";
import { actionRoute, type ApiRoute, type Param, ref, route, type RouteContext } from "./route.ts";
import { queueNameSchema } from "./schemas.ts";

const nameParam: Param = { name: "name", in: "path", description: "queue name", schema: queueNameSchema };

async function oneQueue(client: Client, name: string): Promise<Record<string, unknown>> {
  const { queues, byName } = await queuesWithCoverage(client);
  const q = queues.find((x) => x.name === name);
  return { queue: queueToJson(q!, byName.get(name)) };
}

const queueBody = { type: "object" as const, required: ["queue"], properties: { queue: ref("Queue") } };

/** `?create=true` or `{"create": true}`: pause or resume a queue that does not exist yet. */
const createParam: Param = {
  name: "create",
  in: "query",
  description: "true: accept a queue that has no jobs, no row and no live worker yet (else 404 not_found)",
  schema: { type: "string", enum: ["true", "false"] },
};

const createBody = {
  type: "object" as const,
  additionalProperties: false,
  properties: { create: { type: "boolean" as const, description: "the same as ?create=true" } },
};

const wantsCreate = (ctx: RouteContext) => ctx.query.create === "true" || ctx.body.create === true;

/** `POST /queues/:name/pause|resume`. */
function pauseResumeRoute(verb: "pause" | "resume", summary: string): ApiRoute {
  return actionRoute({
    collection: "queues",
    param: nameParam,
    query: [createParam],
    body: createBody,
    verb,
    operationId: `${verb}Queue`,
    summary,
    response: queueBody,
    errors: ["invalid_request", "not_found"],
    run: async (ctx, name) => {
      const o = { create: wantsCreate(ctx) };
      await (verb === "pause"
        ? ctx.client.pauseQueue(name as string, o)
        : ctx.client.resumeQueue(name as string, o));
      return await oneQueue(ctx.client, name as string);
    },
  });
}

export const queueRoutes = [
  route({
    method: "GET",
    path: "/queues",
    operationId: "listQueues",
    summary:
      "Every queue that has jobs or was paused: counts by state, paused, age of the oldest available job",
    tag: "queues",
    mutates: false,
    response: {
      type: "object",
      required: ["queues"],
      properties: {
        queues: { type: "array", items: ref("Queue") },
      },
    },
    errors: [],
    async handler({ client }) {
      const { queues, byName } = await queuesWithCoverage(client);
      return { queues: queues.map((q) => queueToJson(q, byName.get(q.name))) };
    },
  }),
  pauseResumeRoute(
    "pause",
    "Pause a queue: workers stop claiming its jobs (an unknown queue is 404 unless create: pausing ahead)",
  ),
  pauseResumeRoute("resume", "Resume a paused queue (an unknown queue is 404 unless create)"),
];

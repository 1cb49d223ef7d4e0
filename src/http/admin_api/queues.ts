/** Queues: list with counts by state, pause, resume. */
import type { Client } from "../../client/client.ts";
import { type QueueJson, queueLimitToJson, queueToJson } from "../../wire.ts";
import { MAX_LIMIT_WINDOW_MS } from "../../storage/shared/limits.ts";
import { queuesWithCoverage } from "../../client/coverage.ts";
import { actionRoute, type ApiRoute, type Param, ref, route, type RouteContext } from "./route.ts";
import { queueNameSchema } from "./schemas.ts";

const nameParam: Param = { name: "name", in: "path", description: "queue name", schema: queueNameSchema };

/** Every queue as JSON, with its limits. */
async function queuesJson(client: Client): Promise<QueueJson[]> {
  const { queues, byName, limits } = await queuesWithCoverage(client);
  return queues.map((q) => queueToJson(q, byName.get(q.name), limits.get(q.name)));
}

async function oneQueue(client: Client, name: string): Promise<Record<string, unknown>> {
  return { queue: (await queuesJson(client)).find((q) => q.name === name) };
}

const intOrNull = (description: string, maximum = 2_147_483_647) => ({
  type: ["integer", "null"] as string[],
  minimum: 1,
  maximum,
  description,
});

/** The body of `PUT /queues/:name/limit`: the queue's limits, each kind absent or null for none. */
const limitBody = {
  type: "object" as const,
  additionalProperties: false,
  properties: {
    concurrency: intOrNull("at most this many attempts open at once across every worker"),
    rate: intOrNull("at most this many claims in any window of per_ms (give both or neither)"),
    per_ms: intOrNull("the rate's window in milliseconds, 1 to 86400000", MAX_LIMIT_WINDOW_MS),
    per_key: intOrNull("at most this many attempts open per limit key (queue storage)"),
    count_parked: {
      type: "boolean" as const,
      description: "attempts parked for an HTTP callback hold a unit",
    },
  },
};

const limitResponse = {
  type: "object" as const,
  required: ["limit"],
  properties: { limit: { oneOf: [ref("QueueLimit"), { type: "null" as const }] } },
};

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
      return { queues: await queuesJson(client) };
    },
  }),
  route({
    method: "PUT",
    path: "/queues/:name/limit",
    operationId: "setQueueLimit",
    summary:
      "Set a queue's fleet-wide limits (replacing every limit it had; {} keeps a row without limits, so no " +
      "worker's option seeds one); every worker obeys them at its next claim",
    tag: "queues",
    mutates: true,
    params: [nameParam],
    body: limitBody,
    response: limitResponse,
    errors: ["invalid_request"],
    async handler(ctx) {
      const b = ctx.body as Record<string, number | boolean | null | undefined>;
      const info = await ctx.client.setQueueLimit(String(ctx.params.name), {
        concurrency: b.concurrency as number | null | undefined,
        rate: b.rate as number | null | undefined,
        per: b.per_ms as number | null | undefined,
        perKey: typeof b.per_key === "number" ? { concurrency: b.per_key } : null,
        ...(typeof b.count_parked === "boolean" ? { countParked: b.count_parked } : {}),
      }, { setBy: "api" });
      ctx.logger.info(`svc serve: limits of queue ${ctx.params.name} set to ${JSON.stringify(b)}`);
      return { limit: queueLimitToJson(info) };
    },
  }),
  route({
    method: "GET",
    path: "/queues/:name/limit",
    operationId: "getQueueLimit",
    summary: "A queue's fleet-wide limits and their current use (null when it has no limits row)",
    tag: "queues",
    mutates: false,
    params: [nameParam],
    response: limitResponse,
    errors: ["invalid_request"],
    async handler(ctx) {
      const l = (await ctx.client.listQueueLimits()).find((x) => x.queue === ctx.params.name);
      return { limit: l ? queueLimitToJson(l) : null };
    },
  }),
  route({
    method: "DELETE",
    path: "/queues/:name/limit",
    operationId: "resetQueueLimit",
    summary: "Delete a queue's limits row (a worker's limit option may seed one again)",
    tag: "queues",
    mutates: true,
    params: [nameParam],
    response: { type: "object", required: ["reset"], properties: { reset: { type: "boolean" } } },
    errors: ["invalid_request"],
    async handler(ctx) {
      const reset = await ctx.client.resetQueueLimit(String(ctx.params.name));
      ctx.logger.info(`svc serve: limits row of queue ${ctx.params.name} deleted`);
      return { reset };
    },
  }),
  pauseResumeRoute(
    "pause",
    "Pause a queue: workers stop claiming its jobs (an unknown queue is 404 unless create: pausing ahead)",
  ),
  pauseResumeRoute("resume", "Resume a paused queue (an unknown queue is 404 unless create)"),
];

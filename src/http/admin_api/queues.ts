/** Queues: list with counts by state, pause, resume. */
import type { Client } from "../../client/client.ts";
import { queueToJson } from "../../wire.ts";
import { actionRoute, type Param, ref, route } from "./route.ts";
import { queueNameSchema } from "./schemas.ts";

const nameParam: Param = { name: "name", in: "path", description: "queue name", schema: queueNameSchema };

async function oneQueue(client: Client, name: string): Promise<Record<string, unknown>> {
  const q = (await client.listQueues()).find((x) => x.name === name);
  return { queue: queueToJson(q!) };
}

const queueBody = { type: "object" as const, required: ["queue"], properties: { queue: ref("Queue") } };

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
      properties: { queues: { type: "array", items: ref("Queue") } },
    },
    errors: [],
    async handler({ client }) {
      return { queues: (await client.listQueues()).map(queueToJson) };
    },
  }),
  actionRoute({
    collection: "queues",
    param: nameParam,
    verb: "pause",
    operationId: "pauseQueue",
    summary: "Pause a queue: workers stop claiming its jobs (a queue without jobs yet can be paused ahead)",
    response: queueBody,
    errors: ["invalid_request"],
    run: async ({ client }, name) => {
      await client.pauseQueue(name as string);
      return await oneQueue(client, name as string);
    },
  }),
  actionRoute({
    collection: "queues",
    param: nameParam,
    verb: "resume",
    operationId: "resumeQueue",
    summary: "Resume a paused queue",
    response: queueBody,
    errors: ["invalid_request"],
    run: async ({ client }, name) => {
      await client.resumeQueue(name as string);
      return await oneQueue(client, name as string);
    },
  }),
];

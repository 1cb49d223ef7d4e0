/** Runtimes: the worker processes in the runtimes table, their queues, readiness and the leader. */
import { runtimeToJson } from "../../wire.ts";
import { ref, route } from "./route.ts";

export const runtimeRoutes = [
  route({
    method: "GET",
    path: "/runtimes",
    operationId: "listRuntimes",
    summary: "Worker processes (live ones heartbeated within 3 intervals), their queues, readiness, leader",
    tag: "runtimes",
    mutates: false,
    response: {
      type: "object",
      required: ["runtimes"],
      properties: { runtimes: { type: "array", items: ref("Runtime") } },
    },
    errors: [],
    async handler({ client }) {
      return { runtimes: (await client.listRuntimes()).map(runtimeToJson) };
    },
  }),
];

/** Runtimes: the worker processes in the runtimes table, their queues, readiness and the leader. */
import type { RuntimeInfo } from "../../types.ts";
import { ref, route } from "./route.ts";

/** A runtime as JSON. */
export function runtimeToJson(r: RuntimeInfo): Record<string, unknown> {
  return {
    id: r.id,
    hostname: r.hostname,
    pid: r.pid,
    queues: r.queues,
    ready: r.ready,
    leader: r.leader,
    started_at: new Date(r.startedAt).toISOString(),
    heartbeat_at: new Date(r.heartbeatAt).toISOString(),
    live: r.live,
  };
}

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

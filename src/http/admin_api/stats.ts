/** Stats for the dashboard: counts by state, per queue, and completions/failures per minute. */
import { queueStats, sumCounts, throughput } from "../../storage/canonical/stats.ts";
import { ref, route } from "./route.ts";
import { queueToJson } from "./queues.ts";

/** Minutes of throughput history on the dashboard. */
export const THROUGHPUT_MINUTES = 60;

export const statsRoutes = [
  route({
    method: "GET",
    path: "/stats",
    operationId: "getStats",
    summary: "Counts by state, per queue, and completions/failures per minute over the last 60 minutes",
    tag: "stats",
    mutates: false,
    response: {
      type: "object",
      required: ["counts", "queues", "throughput"],
      properties: {
        counts: ref("StateCounts"),
        queues: { type: "array", items: ref("Queue") },
        throughput: {
          type: "array",
          description: "one entry per minute, oldest first, the current minute last",
          items: {
            type: "object",
            properties: {
              minute: { type: "string", format: "date-time" },
              completed: { type: "integer" },
              failed: { type: "integer", description: "jobs failed for good (retries are not counted)" },
            },
          },
        },
      },
    },
    errors: [],
    async handler({ client }) {
      const [queues, points] = await Promise.all([
        queueStats(client.db, client.names),
        throughput(client.db, client.names, THROUGHPUT_MINUTES),
      ]);
      return {
        counts: sumCounts(queues),
        queues: queues.map(queueToJson),
        throughput: points.map((p) => ({
          minute: new Date(p.minute).toISOString(),
          completed: p.completed,
          failed: p.failed,
        })),
      };
    },
  }),
];

/** Stats for the dashboard: counts by state, per queue, and completions/failures per minute. */
import { JOB_STATES, type JobState, type QueueInfo } from "../../types.ts";
import { ref, route } from "./route.ts";
import { queueToJson } from "../../wire.ts";

/** Counts by state summed over queues, with the states whose sum is a lower bound. */
function sumCounts(queues: QueueInfo[]): { counts: Record<JobState, number>; approximate: JobState[] } {
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  const approximate = new Set<JobState>();
  for (const q of queues) {
    for (const s of JOB_STATES) counts[s] += q.counts[s];
    for (const s of q.approximate ?? []) approximate.add(s);
  }
  return { counts, approximate: [...approximate] };
}

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
        approximate: {
          type: "array",
          items: { type: "string" },
          description: "states whose count is a lower bound (counting them exactly would read a large table)",
        },
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
        client.listQueues(),
        client.engine.throughput(THROUGHPUT_MINUTES),
      ]);
      return {
        ...sumCounts(queues),
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

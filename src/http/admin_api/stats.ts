/** Stats for the dashboard: counts by state, per queue, and completions/failures per minute. */
import { queuesWithCoverage } from "../../client/coverage.ts";
import { JOB_STATES, type JobState, type QueueInfo } from "../../types.ts";
import { ref, route } from "./route.ts";
import { queueToJson } from "../../wire.ts";
import { kindFilterSchema, queryParam, queueNameSchema } from "./schemas.ts";

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
        unserved: {
          type: "array",
          description: "queues whose available jobs no live runtime will run: none serves the queue " +
            "(live_runtimes 0), or none of those serving it has a handler for unhandled_kinds",
          items: {
            type: "object",
            properties: {
              queue: { type: "string" },
              available: { type: "integer" },
              live_runtimes: { type: "integer" },
              unhandled_kinds: { type: "array", items: { type: "string" } },
            },
          },
        },
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
      const [{ queues, coverage, byName, limits }, points] = await Promise.all([
        queuesWithCoverage(client),
        client.engine.throughput(THROUGHPUT_MINUTES),
      ]);
      return {
        ...sumCounts(queues),
        queues: queues.map((q) => queueToJson(q, byName.get(q.name), limits.get(q.name))),
        unserved: coverage
          .filter((c) => c.available > 0 && (c.liveRuntimes === 0 || c.unhandledKinds.length > 0))
          .map((c) => ({
            queue: c.queue,
            available: c.available,
            live_runtimes: c.liveRuntimes,
            unhandled_kinds: c.unhandledKinds,
          })),
        throughput: points.map((p) => ({
          minute: new Date(p.minute).toISOString(),
          completed: p.completed,
          failed: p.failed,
        })),
      };
    },
  }),
  route({
    method: "GET",
    path: "/stats/samples",
    operationId: "getSamples",
    summary:
      "Per-minute samples written by the leader: per queue its depth, per (queue, kind) finished attempts",
    tag: "stats",
    mutates: false,
    params: [
      queryParam("queue", "only samples of this queue", queueNameSchema),
      queryParam("kind", "only samples of this kind (leaves out the per-queue depth rows)", kindFilterSchema),
      queryParam("minutes", "the last this many minutes (default 60, at most 7 days)", {
        type: "integer",
        minimum: 1,
        maximum: 10_080,
        default: 60,
      }),
    ],
    response: {
      type: "object",
      required: ["samples"],
      properties: {
        samples: {
          type: "array",
          description: "oldest first; per minute the queue rows (kind null, depth set) before the kind rows",
          items: {
            type: "object",
            properties: {
              minute: { type: "string", format: "date-time", description: "start of the minute" },
              queue: { type: "string" },
              kind: { type: ["string", "null"], description: "null on a queue's depth row" },
              depth: {
                type: ["integer", "null"],
                description: "available jobs a few seconds after the minute ended (an estimate: counted up " +
                  "to 10,000 per lane); null on kind rows",
              },
              completed: { type: "integer" },
              failed: { type: "integer", description: "attempts that failed for good" },
              retried: { type: "integer", description: "attempts that failed and were scheduled again" },
              run_p50_ms: {
                type: ["number", "null"],
                description: "median run time of the finished attempts",
              },
              run_p95_ms: { type: ["number", "null"] },
            },
          },
        },
      },
    },
    errors: ["invalid_request"],
    async handler({ client, query }) {
      const rows = await client.engine.samples.list({
        queue: query.queue as string | undefined,
        kind: query.kind as string | undefined,
        minutes: (query.minutes as number | undefined) ?? 60,
      });
      return {
        samples: rows.map((r) => ({
          minute: r.minute.toISOString(),
          queue: r.queue,
          kind: r.kind,
          depth: r.depth,
          completed: r.completed,
          failed: r.failed,
          retried: r.retried,
          run_p50_ms: r.runP50Ms,
          run_p95_ms: r.runP95Ms,
        })),
      };
    },
  }),
];

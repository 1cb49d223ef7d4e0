/**
 * Kinds: every job kind in the table with its counts by state, and its figures over the last hour from
 * the leader's per-minute samples (completed, failed, failure rate, run-time p50 and p95).
 */
import { JOB_STATES, type JobState } from "../../types.ts";
import { ref, route } from "./route.ts";

function emptyCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

export const kindRoutes = [
  route({
    method: "GET",
    path: "/kinds",
    operationId: "listKinds",
    summary: "Every job kind present, with its counts by state and its last hour from the samples",
    tag: "kinds",
    mutates: false,
    response: {
      type: "object",
      required: ["kinds"],
      properties: {
        kinds: {
          type: "array",
          items: {
            type: "object",
            properties: {
              kind: { type: "string" },
              counts: ref("StateCounts"),
              completed_1h: { type: "integer", description: "attempts completed in the last hour (samples)" },
              failed_1h: { type: "integer", description: "attempts failed for good in the last hour" },
              retried_1h: {
                type: "integer",
                description: "attempts that failed and were retried, in the last hour",
              },
              failure_rate: {
                type: ["number", "null"],
                description: "failed attempts (retried or not) over finished attempts in the last hour; " +
                  "null when none finished",
              },
              run_p50_ms: {
                type: ["number", "null"],
                description: "median of the per-minute run-time medians of the last hour",
              },
              run_p95_ms: {
                type: ["number", "null"],
                description: "95th percentile of the per-minute run-time p95 of the last hour",
              },
            },
          },
        },
      },
    },
    errors: [],
    async handler({ client }) {
      const [k, stats] = await Promise.all([client.engine.kindCounts(), client.engine.samples.kindStats(60)]);
      const byKind = new Map(stats.map((s) => [s.kind, s]));
      // Kinds that finished jobs in the last hour but have none left (retention 0) are listed too.
      const kinds = [...new Set([...k.kinds.map((x) => x.kind), ...byKind.keys()])].sort();
      const counts = new Map(k.kinds.map((x) => [x.kind, x.counts]));
      return {
        approximate: k.approximate,
        kinds: kinds.map((kind) => {
          const s = byKind.get(kind);
          return {
            kind,
            counts: counts.get(kind) ?? emptyCounts(),
            completed_1h: s?.completed ?? 0,
            failed_1h: s?.failed ?? 0,
            retried_1h: s?.retried ?? 0,
            failure_rate: s?.failureRate ?? null,
            run_p50_ms: s?.runP50Ms ?? null,
            run_p95_ms: s?.runP95Ms ?? null,
          };
        }),
      };
    },
  }),
];

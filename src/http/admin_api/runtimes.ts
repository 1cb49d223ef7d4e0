/**
 * Runtimes: the worker processes in the runtimes table, their queues, readiness and the leader; and the
 * jobs running now (the UI's "Running now" groups them by the runtime named in `attempted_by`).
 */
import { jobToJson, runtimeToJson } from "../../wire.ts";
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
  route({
    method: "GET",
    path: "/running",
    operationId: "listRunningJobs",
    summary: "Jobs running now, prefetched ones included (attempted_at null), the longest running first",
    tag: "runtimes",
    mutates: false,
    params: [
      {
        name: "limit",
        in: "query",
        description: "at most this many jobs (default 200)",
        schema: { type: "integer", minimum: 1, maximum: 1000, default: 200 },
      },
    ],
    response: {
      type: "object",
      required: ["jobs", "truncated"],
      properties: {
        jobs: { type: "array", items: ref("Job") },
        truncated: { type: "boolean", description: "more jobs are running than `limit`" },
      },
    },
    errors: ["invalid_request"],
    async handler({ client, query }) {
      const limit = (query.limit as number | undefined) ?? 200;
      // One more than asked tells whether the list was cut (1,001 at most: still bounded).
      const jobs = await client.runningJobs(Math.min(limit + 1, 1000));
      const truncated = jobs.length > limit;
      return { jobs: jobs.slice(0, limit).map(jobToJson), truncated };
    },
  }),
];

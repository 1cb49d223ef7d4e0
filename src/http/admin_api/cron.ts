/** Cron schedules: list, trigger now, pause, resume. */
import { CRON_NAME_RE } from "../../cron/definition.ts";
import { cronToJson } from "../../wire.ts";
import { jobToJson } from "../../wire.ts";
import { actionRoute, type Param, ref, route } from "./route.ts";

const nameParam: Param = {
  name: "name",
  in: "path",
  description: "schedule name",
  schema: { type: "string", pattern: CRON_NAME_RE.source },
};

const cronBody = { type: "object" as const, required: ["cron"], properties: { cron: ref("Cron") } };

export const cronRoutes = [
  route({
    method: "GET",
    path: "/cron",
    operationId: "listCron",
    summary: "Every cron schedule with its last and next fire time",
    tag: "cron",
    mutates: false,
    response: {
      type: "object",
      required: ["cron"],
      properties: { cron: { type: "array", items: ref("Cron") } },
    },
    errors: [],
    async handler(ctx) {
      return { cron: (await ctx.client.listCron()).map(cronToJson) };
    },
  }),
  actionRoute({
    collection: "cron",
    param: nameParam,
    verb: "trigger",
    operationId: "triggerCron",
    summary: "Enqueue the schedule's job now (its schedule is unchanged)",
    response: { type: "object", required: ["job"], properties: { job: ref("Job") } },
    errors: ["invalid_request", "not_found"],
    run: async ({ client }, name) => ({ job: jobToJson(await client.triggerCron(name as string)) }),
  }),
  actionRoute({
    collection: "cron",
    param: nameParam,
    verb: "pause",
    operationId: "pauseCron",
    summary: "Pause a schedule: the leader stops firing it",
    response: cronBody,
    errors: ["invalid_request", "not_found"],
    run: async ({ client }, name) => ({ cron: cronToJson(await client.pauseCron(name as string)) }),
  }),
  actionRoute({
    collection: "cron",
    param: nameParam,
    verb: "resume",
    operationId: "resumeCron",
    summary: "Resume a paused schedule (fire times missed while paused are skipped)",
    response: cronBody,
    errors: ["invalid_request", "not_found"],
    run: async ({ client }, name) => ({ cron: cronToJson(await client.resumeCron(name as string)) }),
  }),
];

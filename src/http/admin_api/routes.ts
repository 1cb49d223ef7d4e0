/** The admin API's route table: every resource's routes, and `/openapi.json` generated from them. */
import { openApiDocument } from "../openapi.ts";
import { callbackRoutes } from "./callbacks.ts";
import { capabilityRoutes } from "./capabilities.ts";
import { cronRoutes } from "./cron.ts";
import { jobRoutes } from "./jobs.ts";
import { kindRoutes } from "./kinds.ts";
import { queueRoutes } from "./queues.ts";
import { type ApiRoute, route } from "./route.ts";
import { runtimeRoutes } from "./runtimes.ts";
import { sessionRoutes } from "./session.ts";
import { statsRoutes } from "./stats.ts";
import { storageRoutes } from "./storage.ts";

const resources: ApiRoute[] = [
  ...statsRoutes,
  ...queueRoutes,
  ...jobRoutes,
  ...kindRoutes,
  ...cronRoutes,
  ...runtimeRoutes,
  ...storageRoutes,
  ...capabilityRoutes,
  ...sessionRoutes,
  ...callbackRoutes,
];

/** Every route under `/api`. */
export const ADMIN_ROUTES: readonly ApiRoute[] = [
  ...resources,
  route({
    method: "GET",
    path: "/openapi.json",
    operationId: "getOpenApi",
    summary: "This description (OpenAPI 3.1), generated from the route table",
    tag: "meta",
    mutates: false,
    response: { type: "object" },
    errors: [],
    handler: ({ version }) => Promise.resolve(openApiDocument(ADMIN_ROUTES, version)),
  }),
];

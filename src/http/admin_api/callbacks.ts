/**
 * The callback receiver's three routes, listed here so that `/api/openapi.json` describes them.
 * They pass the raw request to the same `createCallbackRouter` as `svc callbacks serve`, so the
 * answers are the receiver's own: its check order (read-only 503 first), codes and bodies.
 */
import { MAX_HEARTBEAT_SECONDS } from "../callback_router.ts";
import { type ApiRoute, type Param, route, type Schema } from "./route.ts";

const idParam: Param = {
  name: "callback_id",
  in: "path",
  description: "the callback id (a UUID) of the function request",
  schema: { type: "string", format: "uuid" },
};

const success: Schema = {
  type: "object",
  required: ["job_id", "callback_id", "state"],
  properties: {
    job_id: { type: "integer" },
    callback_id: { type: "string", format: "uuid" },
    state: { type: "string", description: "the job's state after the call" },
    timeout_at: {
      type: "string",
      format: "date-time",
      description: "heartbeat only: the new callback deadline",
    },
  },
};

function callbackRoute(action: string, summary: string, body: Schema): ApiRoute {
  return route({
    method: "POST",
    path: `/callbacks/:callback_id/${action}`,
    operationId: `callback${action[0].toUpperCase()}${action.slice(1)}`,
    summary: `${summary} (header X-Service-Signature when the server has a secret)`,
    tag: "callbacks",
    mutates: true,
    passThrough: true,
    params: [idParam],
    body,
    response: success,
    errors: [
      "missing_signature",
      "invalid_signature",
      "invalid_callback_id",
      "payload_too_large",
      "invalid_body",
      "callback_not_found",
      "callback_not_pending",
    ],
    handler: ({ callbacks, req }) => callbacks.fetch(req),
  });
}

export const callbackRoutes = [
  callbackRoute("complete", "Complete the job of a pending callback with a payload", {
    type: "object",
    properties: { payload: { description: "any JSON; stored as the job's result" } },
  }),
  callbackRoute("fail", "Fail the job of a pending callback (terminal unless retryable)", {
    type: "object",
    required: ["error"],
    properties: { error: { type: "string" }, retryable: { type: "boolean" } },
  }),
  callbackRoute("heartbeat", "Move a pending callback's deadline to now + timeout_seconds", {
    type: "object",
    required: ["timeout_seconds"],
    properties: { timeout_seconds: { type: "integer", minimum: 1, maximum: MAX_HEARTBEAT_SECONDS } },
  }),
];

/**
 * The one mapping from errors to HTTP answers, shared by every HTTP surface (the callback receiver,
 * `svc serve`): a status code and the body `{"error": "<message for people>", "code": "<code>"}`.
 * Anything that is not a known svc error is a 500 `internal` whose details go to the log, never to
 * the client.
 */
import { SvcError } from "../errors.ts";
import { BusyError } from "../db/admin_guard.ts";
import type { Logger } from "../types.ts";

/** Status code of every error code an HTTP surface answers with. */
export const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  invalid_request: 400,
  invalid_body: 400,
  invalid_callback_id: 400,
  missing_signature: 401,
  invalid_signature: 401,
  unauthorized: 401,
  cross_origin: 403,
  not_found: 404,
  callback_not_found: 404,
  method_not_allowed: 405,
  invalid_state: 409,
  unique_conflict: 409,
  callback_not_pending: 409,
  payload_too_large: 413,
  internal: 500,
  read_only: 503,
  schema_outdated: 503,
  busy: 503,
};

/** An error raised by the HTTP layer itself (bad signature, body too large...), with its code. */
export class HttpError extends SvcError {
  constructor(code: string, message: string, readonly headers: HeadersInit = {}) {
    super(message, code);
    this.name = "HttpError";
  }
}

/** A JSON response. */
export function json(status: number, body: unknown, headers: HeadersInit = {}): Response {
  const h = new Headers(headers);
  h.set("content-type", "application/json; charset=utf-8");
  h.set("cache-control", "no-store");
  return new Response(JSON.stringify(body), { status, headers: h });
}

/** The status code and body an error is answered with; unknown errors (and unknown codes) are 500 `internal`. */
export function errorBody(e: unknown): { status: number; body: { error: string; code: string } } {
  if (e instanceof SvcError && STATUS_BY_CODE[e.code] !== undefined) {
    return { status: STATUS_BY_CODE[e.code], body: { error: e.message, code: e.code } };
  }
  return {
    status: 500,
    body: { error: "internal error; the details are in the server log", code: "internal" },
  };
}

/** Answers an error; a 500 logs the real error (with `context`, e.g. the method and path) and hides it. */
export function errorResponse(e: unknown, logger?: Pick<Logger, "error">, context = ""): Response {
  const { status, body } = errorBody(e);
  if (status === 500) {
    const detail = e instanceof Error ? (e.stack ?? e.message) : String(e);
    (logger ?? console).error(`svc: internal error${context ? ` in ${context}` : ""}: ${detail}`);
  }
  if (e instanceof BusyError && e.retryAfterSeconds !== null) {
    return json(status, body, { "retry-after": String(e.retryAfterSeconds) });
  }
  return json(status, body, e instanceof HttpError ? e.headers : {});
}

/**
 * Admin API routes as typed values (method, path, summary, parameters, body, answers, handler).
 * `src/http/server.ts` mounts them, `src/http/openapi.ts` describes them, and the parameter and
 * body schemas declared here are the ones requests are validated against: one table, no copies.
 */
import type { Client } from "../../client/client.ts";
import type { CallbackRouter } from "../callback_router.ts";
import type { TokenAuth } from "../auth.ts";
import { HttpError } from "../errors.ts";
import { readBoundedBody } from "../body.ts";
import { parseJsonInput, parseRfc3339, textProblem, utf8Text } from "../../validation.ts";

/** The subset of JSON Schema the routes use (enough for validation and for OpenAPI 3.1). */
export interface Schema {
  type?: "object" | "string" | "integer" | "number" | "boolean" | "array" | "null" | (string)[];
  description?: string;
  enum?: readonly (string | number)[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  properties?: Record<string, Schema>;
  required?: readonly string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  $ref?: string;
  default?: unknown;
  oneOf?: Schema[];
}

/** A path or query parameter. */
export interface Param {
  name: string;
  in: "path" | "query";
  description: string;
  schema: Schema;
  required?: boolean;
}

/** What a handler gets. Parameters arrive validated and converted (integers are numbers). */
export interface RouteContext {
  client: Client;
  /** The callback receiver (the same router as `svc callbacks serve`). */
  callbacks: CallbackRouter;
  readOnly: boolean;
  /** The queue the UI's enqueue form proposes (`AdminServerOptions.defaultQueue`). */
  defaultQueue: string;
  version: string;
  req: Request;
  params: Record<string, string | number>;
  query: Record<string, string | number | undefined>;
  /** The validated JSON body (an empty object when the route takes none). */
  body: Record<string, unknown>;
  /** The token check of `--auth-token`, or null when the server has no token. */
  auth: TokenAuth | null;
  /** Whether the request carries the token (always true without one). */
  authenticated: boolean;
  /** Headers added to the handler's answer (Set-Cookie of the login routes). */
  responseHeaders: Headers;
  /** The server's log (audit lines of destructive changes). */
  logger: { info(line: string): void };
}

/** The error codes a route can answer with, beside `internal` (documented in OpenAPI). */
export type ErrorCode =
  | "invalid_request"
  | "not_found"
  | "invalid_state"
  | "unique_conflict"
  | "read_only"
  | "method_not_allowed"
  | "cross_origin"
  | "unauthorized"
  // the callback receiver's own (docs/reference/protocol.md, "Status codes")
  | "missing_signature"
  | "invalid_signature"
  | "invalid_callback_id"
  | "payload_too_large"
  | "invalid_body"
  | "callback_not_found"
  | "callback_not_pending";

/** One admin API route. */
export interface ApiRoute {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Path under `/api`, with `:name` parameters (e.g. `/jobs/:id/retry`). */
  path: string;
  /** OpenAPI operation id. */
  operationId: string;
  summary: string;
  tag: string;
  /** Changes something: refused with 503 `read_only` in read-only mode, before any other check. */
  mutates: boolean;
  /** Answers without the token of `--auth-token` (capabilities, login, logout). */
  open?: boolean;
  params?: Param[];
  /** JSON request body, validated before the handler runs. */
  body?: Schema;
  /** Success status (default 200) and the schema of its body. */
  status?: number;
  response: Schema;
  /** Error codes besides `internal` (and `read_only`, added for mutating routes). */
  errors: ErrorCode[];
  /**
   * When set, the handler answers the raw request itself, checks included (the callback routes:
   * the receiver's own check order applies, read-only first).
   */
  passThrough?: boolean;
  handler(ctx: RouteContext): Promise<unknown>;
}

/** Declares a route (an identity function that keeps the literal types). */
export function route(r: ApiRoute): ApiRoute {
  return r;
}

/**
 * A `POST /<collection>/:<param>/<verb>` route (pause, resume, retry, cancel, trigger): mutating,
 * one path parameter, and optionally query parameters and a small body. `run` gets the validated
 * path parameter (the rest is in the context).
 */
export function actionRoute(o: {
  collection: string;
  param: Param;
  query?: Param[];
  body?: Schema;
  verb: string;
  operationId: string;
  summary: string;
  response: Schema;
  errors: ErrorCode[];
  run(ctx: RouteContext, key: string | number): Promise<unknown>;
}): ApiRoute {
  return {
    method: "POST",
    path: `/${o.collection}/:${o.param.name}/${o.verb}`,
    operationId: o.operationId,
    summary: o.summary,
    tag: o.collection,
    mutates: true,
    params: [o.param, ...(o.query ?? [])],
    body: o.body,
    response: o.response,
    errors: o.errors,
    handler: (ctx) => o.run(ctx, ctx.params[o.param.name]),
  };
}

/** Shorthand for a `$ref` to a component schema of `src/http/admin_api/schemas.ts`. */
export function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

/** A 400 `invalid_request`. */
export function invalid(message: string): HttpError {
  return new HttpError("invalid_request", message);
}

/** A 404 `not_found`. */
export function notFound(message: string): HttpError {
  return new HttpError("not_found", message);
}

/**
 * Converts and checks a parameter given as text (path or query) against its schema.
 * Returns the value (integers as numbers) or throws 400 `invalid_request` naming the parameter.
 */
export function parseParam(p: Param, raw: string | undefined): string | number | undefined {
  if (raw === undefined || raw === "") {
    if (p.required || p.in === "path") throw invalid(`${p.name} is required`);
    return undefined;
  }
  const s = p.schema;
  if (s.type === "integer") {
    if (!/^-?\d{1,16}$/.test(raw)) {
      throw invalid(`${p.name} must be an integer${range(s)}, got ${JSON.stringify(raw)}`);
    }
    const v = Number(raw);
    checkValue(p.name, v, s);
    return v;
  }
  const problem = textProblem(raw);
  if (problem) throw invalid(`${p.name} ${problem}`);
  checkValue(p.name, raw, s);
  return raw;
}

function range(s: Schema): string {
  if (s.minimum !== undefined && s.maximum !== undefined) return ` from ${s.minimum} to ${s.maximum}`;
  if (s.minimum !== undefined) return ` >= ${s.minimum}`;
  if (s.maximum !== undefined) return ` <= ${s.maximum}`;
  return "";
}

const typeName = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

function typeMatches(t: string, v: unknown): boolean {
  switch (t) {
    case "integer":
      return typeof v === "number" && Number.isSafeInteger(v);
    case "number":
      return typeof v === "number" && Number.isFinite(v);
    case "object":
      return typeof v === "object" && v !== null && !Array.isArray(v);
    case "array":
      return Array.isArray(v);
    case "null":
      return v === null;
    case "string":
      return typeof v === "string";
    case "boolean":
      return typeof v === "boolean";
    default:
      return false;
  }
}

/** Checks a value against a schema (the subset above); throws 400 `invalid_request` naming `at`. */
export function checkValue(at: string, v: unknown, s: Schema): void {
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((t) => typeMatches(t, v))) {
      throw invalid(`${at} must be ${types.map(article).join(" or ")}${range(s)}, got ${typeName(v)}`);
    }
  }
  if (s.enum && !s.enum.includes(v as string)) {
    throw invalid(`${at} must be one of ${s.enum.join(", ")}, got ${JSON.stringify(v)}`);
  }
  if (typeof v === "number") {
    if ((s.minimum !== undefined && v < s.minimum) || (s.maximum !== undefined && v > s.maximum)) {
      throw invalid(`${at} must be${range(s)}, got ${v}`);
    }
  }
  if (typeof v === "string") {
    const problem = textProblem(v);
    if (problem) throw invalid(`${at} ${problem}`);
    if (s.minLength !== undefined && v.length < s.minLength) {
      throw invalid(`${at} must be at least ${s.minLength} character${s.minLength === 1 ? "" : "s"}`);
    }
    if (s.maxLength !== undefined && v.length > s.maxLength) {
      throw invalid(`${at} must be at most ${s.maxLength} characters`);
    }
    if (s.pattern !== undefined && !new RegExp(s.pattern).test(v)) {
      throw invalid(`${at} must match ${s.pattern}, got ${JSON.stringify(v)}`);
    }
    if (s.format === "date-time" && parseRfc3339(v) === null) {
      throw invalid(`${at} must be an RFC 3339 time such as 2026-12-01T09:00:00Z, got ${JSON.stringify(v)}`);
    }
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) {
      throw invalid(`${at} must have at least ${s.minItems} item${s.minItems === 1 ? "" : "s"}`);
    }
    if (s.maxItems !== undefined && v.length > s.maxItems) {
      throw invalid(`${at} must have at most ${s.maxItems} items, got ${v.length}`);
    }
    if (s.items) v.forEach((x, i) => checkValue(`${at}[${i}]`, x, s.items!));
    if (s.uniqueItems && new Set(v.map((x) => JSON.stringify(x))).size !== v.length) {
      throw invalid(`${at} must not repeat an item`);
    }
  }
  if (typeMatches("object", v) && s.properties) {
    const o = v as Record<string, unknown>;
    for (const k of s.required ?? []) if (o[k] === undefined) throw invalid(`${at}.${k} is required`);
    for (const [k, x] of Object.entries(o)) {
      const ps = s.properties[k];
      if (ps) {
        if (x !== undefined) checkValue(`${at}.${k}`, x, ps);
      } else if (s.additionalProperties === false) {
        throw invalid(`${at}.${k} is not a known field (known: ${Object.keys(s.properties).join(", ")})`);
      }
    }
  }
}

function article(t: string): string {
  return t === "null" ? "null" : /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}

/** Largest admin request body accepted (bulk filters and enqueues are small). */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads a JSON object body: 413 `payload_too_large` beyond `MAX_BODY_BYTES` (bytes counted as they
 * arrive), 400 `invalid_request` for bytes that are not UTF-8. An empty body counts as `{}`. JSON that
 * PostgreSQL cannot store or that a double would change is refused (`src/validation.ts`).
 */
export async function readJsonObject(req: Request): Promise<Record<string, unknown>> {
  const text = utf8Text(await readBoundedBody(req, MAX_BODY_BYTES));
  if (text === null) throw invalid("request body is not UTF-8 text: send JSON encoded as UTF-8");
  if (text.trim() === "") return {};
  const parsed = parseJsonInput(text, { envelope: true });
  if (!parsed.ok) {
    throw invalid(
      parsed.syntax
        ? "request body is not JSON: send a JSON object with Content-Type: application/json"
        : `request body cannot be taken: ${parsed.problem}`,
    );
  }
  const v = parsed.value;
  if (!typeMatches("object", v)) throw invalid(`request body must be a JSON object, got ${typeName(v)}`);
  return v as Record<string, unknown>;
}

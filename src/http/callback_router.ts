/**
 * The callback receiver (docs/reference/protocol.md, "Callback URLs and endpoints"): three POST routes,
 * `{prefix}/{callback_id}/complete|fail|heartbeat`, as a fetch handler that `Deno.serve`, Hono or any
 * Web-standard server can mount. `svc callbacks serve` and `svc serve` both use it, so they answer alike.
 *
 * Checks, in order: read-only 503, signature 401, callback id 400, body over 1 MiB 413, body 400 (not
 * JSON, a field of the wrong type, or JSON that cannot be stored as sent: see `src/validation.ts`),
 * unknown callback 404, not pending 409, then 200 with `{job_id, callback_id, state}`.
 */
import { svcMetrics } from "../metrics/svc_metrics.ts";
import type { Client } from "../client/client.ts";
import type { CallbackResult } from "../client/external.ts";
import {
  CALLBACK_ACTIONS,
  type CallbackAction,
  DEFAULT_CALLBACK_PATH_PREFIX,
  isUuid,
  normalizePathPrefix,
} from "../contract/callback_url.ts";
import { SIGNATURE_HEADER, verify } from "../contract/signature.ts";
import { SvcError, ValidationError } from "../errors.ts";
import type { Logger } from "../types.ts";
import { parseJsonInput, utf8Text } from "../validation.ts";
import { errorResponse, HttpError, json, STATUS_BY_CODE } from "./errors.ts";
import { readBoundedBody } from "./body.ts";
import { recordCallbackRejection } from "../storage/shared/callbacks.ts";

/** Statuses of refusals counted on the pending callback they name: bad signature, bad body, too large. */
const COUNTED = new Set([400, 401, 413]);

/** Largest request body accepted, in bytes (1 MiB). */
export const MAX_CALLBACK_BODY_BYTES = 1024 * 1024;

/** Largest `timeout_seconds` of a heartbeat (30 days). */
export const MAX_HEARTBEAT_SECONDS = 2_592_000;

/** How callers are authenticated: by the signature of the callback id, or not at all (trusted networks only). */
export type CallbackAuth = { kind: "signed"; secret: Uint8Array } | { kind: "unsigned" };

/** Options of {@link createCallbackRouter}. */
export interface CallbackRouterOptions {
  /** Path prefix of the three routes (default `/api/callbacks`); must match the workers' `callbackPathPrefix`. */
  pathPrefix?: string;
  /** Signed (with the 32-byte secret of `parseSecret`) or unsigned. Required: there is no silent default. */
  auth: CallbackAuth;
  /** Answer every callback with 503 `read_only` before any other check (`svc serve --read-only`). */
  readOnly?: boolean;
  /** Where 500 details go (default console). */
  logger?: Pick<Logger, "error">;
  /** Count requests in the process's metrics (default true): resolved by action, refused by code. */
  metrics?: boolean;
}

/** The receiver. */
export interface CallbackRouter {
  /** The normalized prefix (`""` when the routes sit at the root). */
  readonly pathPrefix: string;
  /** Answers any request: the three routes, and 404/405 for everything else. */
  fetch(req: Request): Promise<Response>;
  /** Like `fetch`, but resolves to null for paths outside the prefix, so a larger app can fall through. */
  handle(req: Request): Promise<Response | null>;
}

type Body =
  | { action: "complete"; payload: unknown }
  | { action: "fail"; error: string; retryable: boolean }
  | { action: "heartbeat"; timeoutSeconds: number };

/** Builds the callback receiver over a client's pool. */
export function createCallbackRouter(client: Client, opts: CallbackRouterOptions): CallbackRouter {
  const auth = checkAuth(opts?.auth);
  const prefix = normalizePathPrefix(opts.pathPrefix ?? DEFAULT_CALLBACK_PATH_PREFIX);
  const readOnly = opts.readOnly ?? false;
  const logger = opts.logger ?? console;
  const metrics = opts.metrics === false ? null : svcMetrics();

  const notFound = (path: string) =>
    new HttpError(
      "not_found",
      `no route at ${path}: this callback receiver serves only POST ${prefix}/{callback_id}/complete|fail|heartbeat ` +
        "(for callback URLs, the worker's callbackPathPrefix must match the receiver's --path-prefix)",
    );
  const underPrefix = (path: string) => prefix === "" || path === prefix || path.startsWith(`${prefix}/`);

  /**
   * A refused request that names a pending callback is counted on it (docs/reference/protocol.md,
   * "Refused requests"), so a misconfigured function shows on its job instead of the job waiting out
   * its callback timeout in silence.
   */
  const countRejection = async (callbackId: string, e: unknown): Promise<void> => {
    const code = e instanceof SvcError ? e.code : "";
    const status = STATUS_BY_CODE[code];
    if (!COUNTED.has(status) || !isUuid(callbackId)) return;
    try {
      await recordCallbackRejection(client.db, client.names.q, callbackId, status, code);
    } catch { /* counting is best effort: the request is refused either way */ }
  };

  const route = async (req: Request, path: string): Promise<Response> => {
    const m = matchRoute(path.slice(prefix.length));
    if (!m) throw notFound(path);
    try {
      const res = await checked(req, m);
      metrics?.f.svc_callbacks_resolved_total.with(m.action, "ok").inc();
      return res;
    } catch (e) {
      // Codes are a fixed set: anything else counts as internal.
      metrics?.f.svc_callback_requests_rejected_total.with(
        e instanceof SvcError && e.code in STATUS_BY_CODE ? e.code : "internal",
      )
        .inc();
      await countRejection(m.callbackId, e);
      throw e;
    }
  };

  const checked = async (
    req: Request,
    m: { callbackId: string; action: CallbackAction },
  ): Promise<Response> => {
    if (req.method !== "POST") {
      throw new HttpError("method_not_allowed", `${req.method} is not allowed here: use POST`, {
        allow: "POST",
      });
    }
    if (readOnly) {
      throw new HttpError("read_only", "this receiver is read-only: callbacks are not accepted (503)");
    }
    if (auth.kind === "signed") {
      const sig = req.headers.get(SIGNATURE_HEADER);
      if (sig === null) {
        throw new HttpError(
          "missing_signature",
          `missing ${SIGNATURE_HEADER} header: forward the one the worker sent`,
        );
      }
      if (!verify(auth.secret, m.callbackId, sig)) {
        throw new HttpError("invalid_signature", `invalid ${SIGNATURE_HEADER} for this callback id`);
      }
    }
    if (!isUuid(m.callbackId)) {
      throw new HttpError(
        "invalid_callback_id",
        `callback id must be a UUID, got ${JSON.stringify(m.callbackId)}`,
      );
    }
    const body = parseBody(m.action, await readBoundedBody(req, MAX_CALLBACK_BODY_BYTES));
    const r = await resolve(client, m.callbackId, body);
    const out: Record<string, unknown> = { job_id: r.jobId, callback_id: r.callbackId, state: r.state };
    if (r.timeoutAt) out.timeout_at = r.timeoutAt.toISOString();
    return json(200, out);
  };

  const handle = async (req: Request): Promise<Response | null> => {
    const path = new URL(req.url).pathname;
    if (!underPrefix(path)) return null;
    try {
      return await route(req, path);
    } catch (e) {
      return errorResponse(e, logger, `${req.method} ${path}`);
    }
  };

  return {
    pathPrefix: prefix,
    handle,
    async fetch(req) {
      const res = await handle(req);
      if (res) return res;
      return errorResponse(notFound(new URL(req.url).pathname));
    },
  };
}

function checkAuth(auth: CallbackAuth | undefined): CallbackAuth {
  if (auth?.kind === "unsigned") return auth;
  if (auth?.kind === "signed" && auth.secret instanceof Uint8Array && auth.secret.length === 32) return auth;
  throw new ValidationError(
    'createCallbackRouter: auth must be { kind: "signed", secret: parseSecret(<64 hex chars>) } ' +
      'or { kind: "unsigned" } (trusted networks only)',
  );
}

/**
 * `/{id}/{action}` (a trailing slash is ignored) → its parts; anything else (missing, extra or empty
 * segments, unknown action) → null.
 */
function matchRoute(rest: string): { callbackId: string; action: CallbackAction } | null {
  const parts = (rest.endsWith("/") ? rest.slice(0, -1) : rest).split("/");
  if (parts.length !== 3 || parts[0] !== "" || parts[1] === "") return null;
  const action = parts[2] as CallbackAction;
  if (!CALLBACK_ACTIONS.includes(action)) return null;
  let callbackId = parts[1];
  try {
    callbackId = decodeURIComponent(callbackId);
  } catch { /* keep it as sent: it fails the UUID check */ }
  return { callbackId, action };
}

const EXPECTED: Record<CallbackAction, string> = {
  complete: `{"payload": <any JSON, optional>}`,
  fail: `{"error": "<message>", "retryable": <true|false, optional>}`,
  heartbeat: `{"timeout_seconds": <integer 1..${MAX_HEARTBEAT_SECONDS}>}`,
};

function parseBody(action: CallbackAction, bytes: Uint8Array): Body {
  const bad = (why: string) => new HttpError("invalid_body", `${why}; expected ${EXPECTED[action]}`);
  const text = utf8Text(bytes);
  if (text === null) throw bad("body is not UTF-8 text");
  let v: unknown = {};
  if (text.trim() !== "" || action !== "complete") {
    // What PostgreSQL cannot store (NUL, lone surrogates, deep nesting) or a double would change is
    // refused here, before the lookup: it never reaches SQL, so it never fails a shared batch.
    const parsed = parseJsonInput(text, { envelope: true });
    if (!parsed.ok) {
      throw bad(parsed.syntax ? "body is not JSON" : `body cannot be stored: ${parsed.problem}`);
    }
    v = parsed.value;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad("body must be a JSON object");
  const o = v as Record<string, unknown>;
  switch (action) {
    case "complete":
      return { action, payload: o.payload };
    case "fail":
      if (typeof o.error !== "string") throw bad(`"error" must be a string`);
      if (o.retryable !== undefined && typeof o.retryable !== "boolean") {
        throw bad(`"retryable" must be a boolean`);
      }
      return { action, error: o.error, retryable: o.retryable === true };
    case "heartbeat": {
      const t = o.timeout_seconds;
      if (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > MAX_HEARTBEAT_SECONDS) {
        throw bad(`"timeout_seconds" must be an integer from 1 to ${MAX_HEARTBEAT_SECONDS}`);
      }
      return { action, timeoutSeconds: t };
    }
  }
}

function resolve(client: Client, id: string, b: Body): Promise<CallbackResult> {
  switch (b.action) {
    case "complete":
      return client.completeExternal(id, b.payload);
    case "fail":
      return client.failExternal(id, b.error, { retryable: b.retryable });
    case "heartbeat":
      return client.heartbeatExternal(id, { timeoutSeconds: b.timeoutSeconds });
  }
}

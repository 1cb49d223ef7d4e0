/**
 * The HTTP worker, mode `async` (docs/reference/protocol.md; docs/adr/004-http-callbacks.md):
 * for each claimed job of its kind it registers a callback, POSTs the function request to the
 * function endpoint, and on a 2xx parks the attempt in `waiting_external`, freeing its worker slot.
 * The function (or anyone holding the signature) then resolves the callback through the receiver.
 *
 * Outcomes of the POST: 2xx parks; 3xx (redirects are not followed) and 4xx fail the job for good
 * unless the status is in `retryableStatuses`; 5xx, connection errors and the request timeout are
 * retryable. The status and the first 1 KiB of the response body go into the attempt's error.
 */
import { describeThrown } from "../describe.ts";
import { attemptContext, endRequestSpan, startRequestSpan } from "../metrics/tracing.ts";
import { callbackUrl, DEFAULT_CALLBACK_PATH_PREFIX, normalizePathPrefix } from "../contract/callback_url.ts";
import { sign, SIGNATURE_HEADER } from "../contract/signature.ts";
import { TerminalError, ValidationError } from "../errors.ts";
import type { StorageEngine } from "../storage/engine.ts";
import type { Job, Logger } from "../types.ts";
import { defaultBackoff, type KindRunner, PARKED } from "./handlers.ts";
import type { JobContext } from "./job_context.ts";
import { retryWithin } from "./outcome_retry.ts";
import { silentLogger } from "./logger.ts";

/** How one job kind is pushed to a function endpoint (the key in `httpWorkers` is the kind). */
export interface HttpWorkerConfig {
  /** The function endpoint (http or https). */
  url: string;
  /** `async`: park after a 2xx and wait for the callback (the contract's `Async`). */
  mode: "async";
  /** Externally reachable base address of the callback receiver, e.g. `https://svc.example.com`. Required. */
  callbackBaseUrl?: string;
  /** Path prefix of the receiver's routes (default `/api/callbacks`); must match the receiver's `--path-prefix`. */
  callbackPathPrefix?: string;
  /** How long a parked attempt waits for its callback, in ms (default 1 hour). */
  callbackTimeout?: number;
  /** The 32-byte secret shared with the receiver (`parseSecret(hex)`); when absent no signature is sent. */
  hmacSecret?: Uint8Array;
  /** Timeout of the POST, response body included, in ms (default 30 000). */
  requestTimeout?: number;
  /** Extra request headers (Content-Type, Idempotency-Key and the signature are always set by svc). */
  headers?: Record<string, string>;
  /** 3xx/4xx statuses retried instead of failing the job, e.g. `[429]`; `Retry-After` is honoured. */
  retryableStatuses?: number[];
  /** Attempts cap for this kind, on top of the job's own max_attempts. */
  maxAttempts?: number;
  /** Delay before retry `attempt` (1-based) in ms (default 2^attempt s plus up to 25 % jitter). */
  backoff?: (attempt: number) => number;
}

/** What the runner needs from the worker. */
export interface HttpRunnerDeps {
  engine: StorageEngine;
  logger?: Logger;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
  /** Told of every park written in the background, so that shutdown can wait for them. */
  onParking?: (parking: Promise<void>) => void;
  /** Told of an attempt whose park could not be written (the heartbeat names it; the leader ends it). */
  abandon?: (attempt: { id: number; lease: number }, reason: string) => void;
  /** How long a failing park is retried (ms, default 0: once). */
  outcomeRetryMs?: number;
  /** Told of each callback registered (by the claim or here). */
  onCallbackRegistered?: (job: Job) => void;
}

import type { FunctionRequest } from "../wire.ts";
export type { FunctionRequest };

/** A retryable failure that asks for its own retry delay (a `Retry-After`); the executor honours `retryDelayMs`. */
export class RetryLaterError extends Error {
  constructor(message: string, readonly retryDelayMs: number) {
    super(message);
    this.name = "RetryLaterError";
  }
}

const DEFAULT_CALLBACK_TIMEOUT = 3_600_000;
const DEFAULT_REQUEST_TIMEOUT = 30_000;
const BODY_EXCERPT_BYTES = 1024;
const MAX_RETRY_AFTER_MS = 86_400_000;
const RESERVED_HEADERS = ["content-type", "idempotency-key", SIGNATURE_HEADER.toLowerCase()];

/** Checks one `httpWorkers` entry; throws a ValidationError naming the option to fix. */
export function validateHttpWorkerConfig(kind: string, c: HttpWorkerConfig): void {
  const at = `httpWorkers.${kind}`;
  const fail = (msg: string): never => {
    throw new ValidationError(`createWorker: ${at}.${msg}`);
  };
  if (!c || typeof c !== "object") {
    throw new ValidationError(`createWorker: ${at} must be an HttpWorkerConfig object`);
  }
  if ((c.mode as string) !== "async") {
    fail(`mode must be "async" (the only mode), got ${JSON.stringify(c.mode)}`);
  }
  if (!isHttpUrl(c.url)) {
    fail(`url must be an http(s) URL of the function endpoint, got ${JSON.stringify(c.url)}`);
  }
  if (c.callbackBaseUrl === undefined || c.callbackBaseUrl === "") {
    fail(
      "callbackBaseUrl is required in async mode: set it to the externally reachable base address of the " +
        "callback receiver (e.g. https://svc.example.com), so the function knows where to call back",
    );
  }
  if (!isHttpUrl(c.callbackBaseUrl)) {
    fail(`callbackBaseUrl must be an http(s) URL, got ${JSON.stringify(c.callbackBaseUrl)}`);
  }
  if (c.callbackPathPrefix !== undefined && typeof c.callbackPathPrefix !== "string") {
    fail("callbackPathPrefix must be a string such as /api/callbacks");
  }
  for (
    const [name, v] of [["callbackTimeout", c.callbackTimeout], ["requestTimeout", c.requestTimeout]] as const
  ) {
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) {
      fail(`${name} must be a positive number of milliseconds`);
    }
  }
  if (c.hmacSecret !== undefined && !(c.hmacSecret instanceof Uint8Array && c.hmacSecret.length === 32)) {
    fail("hmacSecret must be 32 bytes: parseSecret(<64 hex characters>)");
  }
  if (c.retryableStatuses !== undefined) {
    if (!Array.isArray(c.retryableStatuses) || !c.retryableStatuses.every((s) => Number.isInteger(s))) {
      fail("retryableStatuses must be an array of HTTP status codes, e.g. [429]");
    }
  }
  for (const name of Object.keys(c.headers ?? {})) {
    if (RESERVED_HEADERS.includes(name.toLowerCase())) fail(`headers must not set ${name}: svc sets it`);
  }
  if (c.maxAttempts !== undefined && !(Number.isInteger(c.maxAttempts) && c.maxAttempts >= 1)) {
    fail("maxAttempts must be a positive integer");
  }
  if (c.backoff !== undefined && typeof c.backoff !== "function") {
    fail("backoff must be a function (attempt) => ms");
  }
}

function isHttpUrl(s: unknown): boolean {
  if (typeof s !== "string") return false;
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

/** Builds the executor of one job kind pushed to a function endpoint. */
export function createHttpRunner(kind: string, config: HttpWorkerConfig, deps: HttpRunnerDeps): KindRunner {
  validateHttpWorkerConfig(kind, config);
  const c = config;
  const base = c.callbackBaseUrl!;
  const prefix = normalizePathPrefix(c.callbackPathPrefix ?? DEFAULT_CALLBACK_PATH_PREFIX);
  const callbackTimeout = c.callbackTimeout ?? DEFAULT_CALLBACK_TIMEOUT;
  const requestTimeout = c.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT;
  const retryable = new Set(c.retryableStatuses ?? []);
  const doFetch = deps.fetch ?? fetch;
  const logger = deps.logger;
  // The URL spans show: without query or credentials.
  const spanUrl = (() => {
    const u = new URL(c.url);
    return `${u.origin}${u.pathname}`;
  })();

  const run = async (job: Job, ctx: JobContext): Promise<unknown> => {
    // Registered before the POST: a function that calls back at once finds its callback. The worker's
    // claim statement registers it already (one commit fewer per job); register here otherwise.
    const callbackId = job.callbackId ??
      await deps.engine.registerCallback({
        id: job.id,
        lease: job.lease,
        timeoutMs: callbackTimeout,
        kind: "http",
      });
    if (!callbackId) {
      logger?.debug(`svc: job ${job.id} is no longer running this attempt; not calling its function`);
      return PARKED; // someone else changed the job (cancelled, rescued): write nothing
    }
    deps.onCallbackRegistered?.(job);
    const body: FunctionRequest = {
      job_id: job.id,
      kind,
      args: job.args,
      attempt: job.attempt,
      max_attempts: job.maxAttempts,
      callback_id: callbackId,
      callback_url: callbackUrl(base, prefix, callbackId, "complete"),
      fail_url: callbackUrl(base, prefix, callbackId, "fail"),
      heartbeat_url: callbackUrl(base, prefix, callbackId, "heartbeat"),
    };
    const headers = new Headers(c.headers ?? {});
    headers.set("content-type", "application/json");
    headers.set("idempotency-key", `${job.id}:${job.attempt}`);
    if (c.hmacSecret) headers.set(SIGNATURE_HEADER, sign(c.hmacSecret, callbackId));
    // The request's span, child of the attempt's; its traceparent goes to the function endpoint.
    const reqSpan = startRequestSpan(attemptContext(ctx), spanUrl, job);
    if (reqSpan.traceparent) headers.set("traceparent", reqSpan.traceparent);

    const timeout = AbortSignal.timeout(requestTimeout);
    const signal = AbortSignal.any([ctx.signal, timeout]);
    const timedOut = () => timeout.aborted && !ctx.signal.aborted;
    let status: number;
    let statusText: string;
    let excerpt: string;
    let retryAfter: string | null;
    let location: string | null;
    try {
      const res = await doFetch(c.url, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        redirect: "manual",
        signal,
      });
      status = res.status;
      statusText = res.statusText;
      retryAfter = res.headers.get("retry-after");
      location = res.headers.get("location");
      if (status >= 200 && status < 300) {
        await res.body?.cancel().catch(() => {}); // the body is not used
        excerpt = "";
      } else {
        excerpt = await readExcerpt(res).catch(() => "(response body could not be read)");
      }
    } catch (e) {
      endRequestSpan(reqSpan.span, null, (e as Error)?.message ?? String(e));
      if (timedOut()) {
        throw new Error(
          `function endpoint did not answer within the request timeout of ${requestTimeout} ms`,
        );
      }
      if (ctx.signal.aborted) throw e; // cancel or shutdown: the executor records it
      throw new Error(`could not reach the function endpoint: ${(e as Error)?.message ?? e}`);
    }
    endRequestSpan(reqSpan.span, status);

    if (status >= 200 && status < 300) {
      // The function has the job: the slot is free now and the park is written in the background, as a
      // completion is (parks that happen together share one statement). It parks unless the function
      // already called back (or the job changed). A park that never lands leaves the attempt `running`:
      // the worker names it in its heartbeat and the leader's rescue retries it.
      const parking = retryWithin(
        () => deps.engine.park({ id: job.id, lease: job.lease, callbackId }),
        deps.outcomeRetryMs ?? 0,
        logger ?? silentLogger,
        `parking job ${job.id}`,
      ).then(
        (parked) => {
          if (!parked) {
            logger?.debug(
              `svc: job ${job.id}: callback ${callbackId} resolved before the attempt was parked`,
            );
          }
        },
        (e) => {
          const why = describeThrown(e);
          logger?.error(
            `svc: job ${job.id}: could not park the attempt (${why}); it will be rescued and retried`,
          );
          deps.abandon?.(job, `could not park the attempt: ${why}`);
        },
      );
      deps.onParking?.(parking);
      return PARKED;
    }
    const what = `function endpoint responded HTTP ${status}${statusText ? ` ${statusText}` : ""}` +
      (status >= 300 && status < 400 ? ` (redirect${location ? ` to ${location}` : ""} not followed)` : "") +
      (excerpt ? `: ${excerpt}` : "");
    // The attempt's stack is the function's answer: its status, Retry-After and Location, and its first bytes.
    const answer = `HTTP ${status}${statusText ? ` ${statusText}` : ""}` +
      (retryAfter ? `\nretry-after: ${retryAfter}` : "") + (location ? `\nlocation: ${location}` : "") +
      `\n\n${excerpt || "(empty body)"}`;
    const withAnswer = <E extends Error>(e: E): E => {
      e.stack = answer;
      return e;
    };
    if (status >= 500 || retryable.has(status) || status < 200) {
      const delay = parseRetryAfter(retryAfter);
      if (delay !== null) throw withAnswer(new RetryLaterError(what, delay));
      throw withAnswer(new Error(what));
    }
    throw withAnswer(new TerminalError(what));
  };

  return { run, maxAttempts: c.maxAttempts, backoff: c.backoff ?? defaultBackoff, callbackTimeout };
}

/** The first 1 KiB of a response body as text (the rest is not read). */
async function readExcerpt(res: Response): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const buf = new Uint8Array(BODY_EXCERPT_BYTES);
  let n = 0;
  let more = false;
  try {
    while (n < BODY_EXCERPT_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      const take = Math.min(value.byteLength, BODY_EXCERPT_BYTES - n);
      buf.set(value.subarray(0, take), n);
      n += take;
      if (take < value.byteLength) more = true;
    }
    if (!more && n === BODY_EXCERPT_BYTES) more = !(await reader.read()).done;
  } finally {
    await reader.cancel().catch(() => {});
  }
  // A multi-byte character cut at the 1 KiB boundary decodes as U+FFFD rather than failing.
  const text = new TextDecoder().decode(buf.subarray(0, n)).trim();
  return more ? `${text}…` : text;
}

/** `Retry-After` as a delay in ms (delta-seconds or an HTTP date), capped at 24 h; null when absent or unreadable. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | null {
  if (v === null) return null;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Math.min(Number(s) * 1000, MAX_RETRY_AFTER_MS);
  const at = /[a-z]/i.test(s) ? Date.parse(s) : NaN; // an HTTP date has a weekday and a month name
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

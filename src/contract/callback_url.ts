/**
 * Callback URL construction (docs/reference/protocol.md, "URLs"): the one place that turns a receiver
 * base URL, a path prefix and a callback id into the address a function calls back. The worker, the
 * receiver and users' own receivers all use it, so the three always agree.
 *
 * @module
 */
import { ValidationError } from "../errors.ts";

/** Default path prefix of the callback receiver's routes. */
export const DEFAULT_CALLBACK_PATH_PREFIX: string = "/api/callbacks";

/** The three callback endpoints of the receiver. */
export type CallbackAction = "complete" | "fail" | "heartbeat";

/** Every callback action, in the order the contract lists them. */
export const CALLBACK_ACTIONS: readonly CallbackAction[] = ["complete", "fail", "heartbeat"];

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `s` is a UUID in canonical 8-4-4-4-12 hex form (any case, any version). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

function stripTrailingSlashes(s: string): string {
  let end = s.length;
  while (end > 0 && s[end - 1] === "/") end--;
  return s.slice(0, end);
}

/**
 * Normalizes a callback path prefix: trims surrounding whitespace and strips trailing slashes; an
 * empty result stays empty (so `""` and `"/"` both mean "no prefix"); otherwise a missing leading
 * slash is added. `"api/callbacks/"` becomes `"/api/callbacks"`.
 */
export function normalizePathPrefix(prefix: string): string {
  const trimmed = stripTrailingSlashes(prefix.trim());
  if (trimmed === "") return "";
  return trimmed.startsWith("/") ? trimmed : `/${trimmed}`;
}

/**
 * Builds the URL of one callback endpoint:
 * `{baseUrl without trailing slashes}{normalized prefix}/{callbackId}/{action}`.
 * An undefined `pathPrefix` means {@link DEFAULT_CALLBACK_PATH_PREFIX}. The callback id is
 * percent-encoded as one path segment (a UUID is left unchanged).
 */
export function callbackUrl(
  baseUrl: string,
  pathPrefix: string | undefined,
  callbackId: string,
  action: CallbackAction = "complete",
): string {
  if (!CALLBACK_ACTIONS.includes(action)) {
    throw new ValidationError(
      `unknown callback action "${action}": expected one of ${CALLBACK_ACTIONS.join(", ")}`,
    );
  }
  const prefix = normalizePathPrefix(pathPrefix ?? DEFAULT_CALLBACK_PATH_PREFIX);
  return `${stripTrailingSlashes(baseUrl)}${prefix}/${encodeURIComponent(callbackId)}/${action}`;
}

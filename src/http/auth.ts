/**
 * The admin API's guards against other sites and other people: the cross-origin check on mutations and
 * the optional token of `svc serve --auth-token` (a bearer header, or the session cookie the UI's
 * login form sets).
 */
import { hmac } from "npm:@noble/hashes@2.4.0/hmac.js";
import { sha256 } from "npm:@noble/hashes@2.4.0/sha2.js";
import { bytesToHex, utf8ToBytes } from "npm:@noble/hashes@2.4.0/utils.js";

/** Name of the UI's session cookie. */
export const SESSION_COOKIE = "svc_session";

/** Compares two strings in time that depends on neither (their SHA-256 digests are compared). */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = sha256(utf8ToBytes(a));
  const y = sha256(utf8ToBytes(b));
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
  return diff === 0;
}

/** The request's own origin: its scheme (as a proxy reports it in X-Forwarded-Proto) and its Host. */
function ownOrigin(req: Request): string {
  const url = new URL(req.url);
  const proto = req.headers.get("x-forwarded-proto")?.split(",")[0].trim().toLowerCase() ||
    url.protocol.slice(0, -1);
  return `${proto}://${req.headers.get("host") ?? url.host}`;
}

/**
 * Whether a request comes from another site: it has an `Origin` header that is neither the request's
 * own origin nor one of `allowed`. No Origin (curl, the CLI, a function endpoint) is not cross-site.
 */
export function isCrossOrigin(req: Request, allowed: readonly string[]): boolean {
  const origin = req.headers.get("origin");
  if (origin === null) return false;
  return !allowed.includes(origin) && origin !== ownOrigin(req);
}

/** Whether the request is served over https (directly or behind a proxy that says so). */
export function isHttps(req: Request): boolean {
  return ownOrigin(req).startsWith("https://");
}

/** The token check of `svc serve --auth-token`. */
export interface TokenAuth {
  /** Whether the request carries `Authorization: Bearer <token>` or the session cookie. */
  check(req: Request): boolean;
  /** Whether `token` is the token (the login form). */
  matches(token: string): boolean;
  /** The Set-Cookie value that opens a session (`Secure` when `secure`). */
  sessionCookie(secure: boolean): string;
  /** The Set-Cookie value that ends it. */
  clearCookie(secure: boolean): string;
}

/**
 * The check of one token. The session cookie holds an HMAC of the token, not the token, so a leaked
 * cookie does not reveal it, and every `svc serve` with the same token accepts it.
 */
export function tokenAuth(token: string): TokenAuth {
  const session = bytesToHex(hmac(sha256, utf8ToBytes(token), utf8ToBytes("svc session v1")));
  const attributes = (secure: boolean) => `Path=/api; HttpOnly; SameSite=Strict${secure ? "; Secure" : ""}`;
  return {
    check(req) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.get("authorization") ?? "");
      if (m) return constantTimeEqual(m[1], token);
      for (const part of (req.headers.get("cookie") ?? "").split(";")) {
        const [name, ...value] = part.trim().split("=");
        if (name === SESSION_COOKIE) return constantTimeEqual(value.join("="), session);
      }
      return false;
    },
    matches: (t) => constantTimeEqual(t, token),
    sessionCookie: (secure) => `${SESSION_COOKIE}=${session}; ${attributes(secure)}`,
    clearCookie: (secure) => `${SESSION_COOKIE}=; ${attributes(secure)}; Max-Age=0`,
  };
}

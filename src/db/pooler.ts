/**
 * Transaction poolers (PgBouncer in `pool_mode = transaction`, Supavisor, Neon's pooled endpoint, RDS
 * Proxy): between two transactions the pooler may hand the server connection to another client, so svc
 * keeps no session state there: no named prepared statements, no session `SET`, no session advisory lock,
 * no LISTEN (docs/guide/poolers.md). Whether a URL goes through one: the `pooler` option, else
 * `SERVICE_POOLER`, else what the URL says (a pooler's well-known host or port), else none.
 */
import { ValidationError } from "../errors.ts";
import { env } from "../platform/platform.ts";

/** `transaction`: a transaction pooler is in between; `none`: a direct connection (or a session pooler). */
export type PoolerMode = "transaction" | "none";

/** The mode of a URL and why. */
export interface PoolerInfo {
  mode: PoolerMode;
  /** `option`, `SERVICE_POOLER`, the URL's reason (`port 6432 (PgBouncer)`...) or `default`. */
  source: string;
}

/** Checks a `pooler` value (an option or `SERVICE_POOLER`); `name` is what the message calls it. */
export function checkPoolerMode(value: unknown, name: string): PoolerMode {
  if (value === "transaction" || value === "none") return value;
  throw new ValidationError(`${name} must be "transaction" or "none", got ${JSON.stringify(value)}`);
}

/** What the URL alone says: a reason when its host or port is a transaction pooler's, else null. */
export function poolerFromUrl(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const host = u.hostname.toLowerCase();
  if (host.endsWith(".pooler.supabase.com") && u.port === "6543") {
    return "Supabase's transaction pooler (port 6543)";
  }
  if (/-pooler\./.test(host) && host.includes("neon")) return "Neon's pooled endpoint (-pooler host)";
  if (/\.proxy-[a-z0-9]+\./.test(host) && host.endsWith(".rds.amazonaws.com")) return "an RDS Proxy endpoint";
  if (u.port === "6432") return "port 6432 (PgBouncer's)";
  return null;
}

/** The pooler mode of a connection: the option, else SERVICE_POOLER, else the URL, else none. */
export function resolvePooler(url: string | undefined, option: PoolerMode | undefined): PoolerInfo {
  if (option !== undefined) return { mode: checkPoolerMode(option, "pooler"), source: "option" };
  const fromEnv = env("SERVICE_POOLER");
  if (fromEnv) return { mode: checkPoolerMode(fromEnv, "SERVICE_POOLER"), source: "SERVICE_POOLER" };
  const why = url ? poolerFromUrl(url) : null;
  return why ? { mode: "transaction", source: why } : { mode: "none", source: "default" };
}

/**
 * `svc serve`: the operator process (docs/guide/operations.md, "Running `svc serve`"): the admin UI, the admin REST API under `/api`
 * and the callback receiver under `/api/callbacks`, behind one router. CORS is permissive for reads;
 * changes from another site's pages are refused unless listed with `--cors-origin`; `--auth-token`
 * (or SERVICE_AUTH_TOKEN) makes the API require a token.
 */
import { Command, InvalidArgumentError } from "npm:commander@14.0.3";
import type { Client } from "../client/client.ts";
import { SchemaOutdatedError } from "../errors.ts";
import { createAdminServer } from "../http/server.ts";
import { env, eprintln } from "../platform/platform.ts";
import { serveUntilSignal as listenUntilSignal } from "./listen.ts";
import { callbackAuth } from "./callbacks.ts";
import {
  CliError,
  connectCli,
  DEFAULT_POOL_MAX,
  intArg,
  poolSizeOption,
  servingClient,
  toCliError,
  UsageError,
  withDb,
} from "./common.ts";

function origin(v: string, previous: string[] = []): string[] {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new InvalidArgumentError(
      `--cors-origin must be an origin such as https://admin.example.com, got ${v}`,
    );
  }
  if (!/^https?:$/.test(u.protocol) || u.origin !== v.replace(/\/$/, "")) {
    throw new InvalidArgumentError(
      `--cors-origin must be an origin (scheme://host[:port], no path), such as https://admin.example.com, got ${v}`,
    );
  }
  return [...previous, u.origin];
}

/**
 * `--auth-token` / SERVICE_AUTH_TOKEN: 1 to 4096 visible ASCII characters, no spaces. Checked in the
 * action rather than by commander, whose message would repeat the value.
 */
function authToken(v: string, what: string): string {
  if (!/^[\x21-\x7e]{1,4096}$/.test(v)) {
    throw new UsageError(
      `${what} must be 1 to 4096 visible ASCII characters without spaces (generate one with: openssl rand -hex 32)`,
    );
  }
  return v;
}

/** Whether an environment flag is on (`1`, `true`, `yes`, `on`). */
function envFlag(name: string): boolean {
  const v = env(name)?.toLowerCase();
  if (v === undefined || ["0", "false", "no", "off"].includes(v)) return false;
  if (["1", "true", "yes", "on"].includes(v)) return true;
  throw new UsageError(`${name} must be 1 or 0 (or true/false), got ${JSON.stringify(env(name))}`);
}

/** `svc serve`. */
export function serveCommand(): Command {
  return withDb(new Command("serve"))
    .description("serve the admin UI, the admin REST API (/api) and the callback receiver (/api/callbacks)")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port to listen on (0 picks a free one)", intArg("--port", 0, 65535), 3000)
    .option(
      "--read-only",
      "refuse every change, callbacks included, with 503 (default: env SERVICE_READ_ONLY=1)",
    )
    .option(
      "--callback-hmac-secret <hex>",
      "64-hex-character secret shared with the workers' hmacSecret (default: env SERVICE_CALLBACK_HMAC_SECRET); " +
        "without one, callbacks are not authenticated",
    )
    .option(
      "--pool-max <n>",
      `database connections (default: env SERVICE_POOL_MAX or ${DEFAULT_POOL_MAX})`,
      (v: string) => poolSizeOption(v),
    )
    .option(
      "--cors-origin <origin>",
      "allow only this origin by CORS, and let its pages make changes (repeatable; default: any origin may " +
        "read, only this server's own pages may change)",
      origin,
    )
    .option(
      "--auth-token <token>",
      "require this token on /api (Authorization: Bearer, or the UI's login form) except /api/capabilities " +
        "and the callbacks (default: env SERVICE_AUTH_TOKEN; none: no token)",
    )
    .action(async (o, cmd: Command) => {
      const readOnly = o.readOnly === true || envFlag("SERVICE_READ_ONLY");
      const tokenEnv = env("SERVICE_AUTH_TOKEN");
      const token = o.authToken !== undefined
        ? authToken(o.authToken, "--auth-token")
        : tokenEnv !== undefined
        ? authToken(tokenEnv, "SERVICE_AUTH_TOKEN")
        : undefined;
      const auth = callbackAuth(o.callbackHmacSecret ?? env("SERVICE_CALLBACK_HMAC_SECRET"), true);
      const client = servingClient(cmd, o.poolMax);
      try {
        await connectCli(client, cmd).catch((e) => {
          throw toCliError(e);
        });
        await checkSchema(client);
        await serveUntilSignal(client, {
          host: o.host,
          port: o.port,
          readOnly,
          auth,
          corsOrigins: o.corsOrigin ?? [],
          authToken: token,
        });
      } finally {
        await client.close().catch(() => {});
      }
    });
}

async function checkSchema(client: Client): Promise<void> {
  let s;
  try {
    s = await client.schemaStatus();
  } catch (e) {
    throw toCliError(e);
  }
  if (s.current === null || s.current < s.expected) {
    throw new CliError(new SchemaOutdatedError(s.current, s.expected).message);
  }
}

async function serveUntilSignal(
  client: Client,
  o: {
    host: string;
    port: number;
    readOnly: boolean;
    auth: ReturnType<typeof callbackAuth>;
    corsOrigins: string[];
    authToken?: string;
  },
): Promise<void> {
  const app = createAdminServer(client, {
    callbackAuth: o.auth,
    readOnly: o.readOnly,
    corsOrigins: o.corsOrigins,
    authToken: o.authToken,
    logger: { info: (line: string) => console.log(line), error: (line: string) => eprintln(line) },
  });
  await listenUntilSignal(o.host, o.port, app.fetch, ({ hostname, port }) => {
    announce(hostname, port, o);
  });
  console.log("svc serve: stopped");
}

function announce(
  hostname: string,
  port: number,
  o: { readOnly: boolean; auth: ReturnType<typeof callbackAuth>; corsOrigins: string[]; authToken?: string },
): void {
  const wildcard = hostname === "0.0.0.0" || hostname === "::";
  const shown = wildcard ? "127.0.0.1" : hostname.includes(":") ? `[${hostname}]` : hostname;
  const notes = [
    "API under /api",
    o.readOnly ? "read-only" : `callbacks ${o.auth.kind}`,
    o.corsOrigins.length
      ? `CORS: ${o.corsOrigins.join(" ")}`
      : "CORS: any origin reads, changes only from this server's pages",
    o.authToken ? "token required" : "no token",
  ];
  if (wildcard) notes.unshift(`listening on all interfaces (${hostname})`);
  console.log(`svc serve: open http://${shown}:${port}/ (${notes.join("; ")})`);
  if (o.auth.kind === "unsigned" && !o.readOnly) {
    eprintln(
      "warning: callbacks are unsigned (no --callback-hmac-secret / SERVICE_CALLBACK_HMAC_SECRET): anyone who " +
        "can reach /api/callbacks can complete jobs; keep it behind private networking or an authenticating proxy",
    );
  }
}

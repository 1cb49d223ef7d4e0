/**
 * `svc callbacks serve`: the callback-only role (docs/guide/http-workers.md). Mounts exactly the three POST routes
 * of the receiver under the prefix: no UI, no admin routes, no CORS. Refuses to start without a
 * secret (unless `--allow-unsigned`), with a malformed secret, or against a read-only database.
 */
import { Command } from "npm:commander@14.0.3";
import type { Client } from "../client/client.ts";
import { DEFAULT_CALLBACK_PATH_PREFIX } from "../contract/callback_url.ts";
import { parseSecret } from "../contract/signature.ts";
import { SchemaOutdatedError } from "../errors.ts";
import { type CallbackAuth, createCallbackRouter } from "../http/callback_router.ts";
import { errorResponse } from "../http/errors.ts";
import { env, eprintln } from "../platform/platform.ts";
import {
  CliError,
  connectCli,
  intArg,
  poolSizeOption,
  servingClient,
  toCliError,
  UsageError,
  withDb,
} from "./common.ts";
import { serveUntilSignal } from "./listen.ts";
import { readOnlyReason } from "../db/schema_version.ts";

/** The signing mode from the flags and the environment, or the one-line refusal. */
export function callbackAuth(secretHex: string | undefined, allowUnsigned: boolean): CallbackAuth {
  if (secretHex !== undefined) {
    try {
      return { kind: "signed", secret: parseSecret(secretHex) };
    } catch (e) {
      throw new UsageError(`--callback-hmac-secret / SERVICE_CALLBACK_HMAC_SECRET: ${(e as Error).message}`);
    }
  }
  if (allowUnsigned) return { kind: "unsigned" };
  throw new CliError(
    "no callback secret: pass --callback-hmac-secret <64 hex characters> or set SERVICE_CALLBACK_HMAC_SECRET " +
      "(generate one with: openssl rand -hex 32; use the same value as the workers' hmacSecret), " +
      "or pass --allow-unsigned on a trusted network",
  );
}

/** Refuses a database that cannot take callback writes (read-only by default, or a standby), then an old schema. */
export async function assertWritable(client: Client): Promise<void> {
  const reason = await readOnlyReason(client.db);
  if (reason === "read_only") {
    throw new CliError(
      "the database is read-only (default_transaction_read_only is on); callbacks must write: " +
        "point --database-url / DATABASE_URL at a writable primary",
    );
  }
  if (reason === "standby") {
    throw new CliError(
      "the database is a standby (pg_is_in_recovery() is true); callbacks must write: " +
        "point --database-url / DATABASE_URL at the primary",
    );
  }
  await assertSchemaCurrent(client);
}

/** Refuses a schema older than this svc expects (or none), naming `svc migrate`. */
export async function assertSchemaCurrent(client: Client): Promise<void> {
  const s = await client.schemaStatus();
  if (s.current === null || s.current < s.expected) {
    throw new CliError(new SchemaOutdatedError(s.current, s.expected).message);
  }
}

/** `svc callbacks ...`. */
export function callbacksCommand(): Command {
  const serve = withDb(new Command("serve"))
    .description(
      "run only the callback receiver: POST {prefix}/{callback_id}/complete|fail|heartbeat (no UI, no admin API, no CORS)",
    )
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port to listen on (0 picks a free one)", intArg("--port", 0, 65535), 4000)
    .option(
      "--callback-hmac-secret <hex>",
      "64-hex-character secret shared with the workers' hmacSecret (default: env SERVICE_CALLBACK_HMAC_SECRET)",
    )
    .option(
      "--path-prefix <prefix>",
      "path prefix of the routes; must match the workers' callbackPathPrefix",
      DEFAULT_CALLBACK_PATH_PREFIX,
    )
    .option(
      "--allow-unsigned",
      "accept callbacks without a signature when no secret is set (trusted networks only)",
    )
    .option(
      "--pool-max <n>",
      "database connections (default: env SERVICE_POOL_MAX or 10)",
      (v: string) => poolSizeOption(v),
    )
    .action(async (o, cmd: Command) => {
      const auth = callbackAuth(
        o.callbackHmacSecret ?? env("SERVICE_CALLBACK_HMAC_SECRET"),
        o.allowUnsigned === true,
      );
      const client = servingClient(cmd, o.poolMax);
      try {
        await connectCli(client, cmd).then(() => assertWritable(client)).catch((e) => {
          throw toCliError(e);
        });
        await serveCallbacks(client, auth, o.host, o.port, o.pathPrefix);
      } finally {
        await client.close().catch(() => {});
      }
    });
  return new Command("callbacks")
    .description("the callback receiver of HTTP workers")
    .addCommand(serve);
}

async function serveCallbacks(
  client: Client,
  auth: CallbackAuth,
  host: string,
  port: number,
  pathPrefix: string,
): Promise<void> {
  const router = createCallbackRouter(client, { pathPrefix, auth, readOnly: false });
  const handler = async (req: Request): Promise<Response> => {
    const t0 = performance.now();
    let res: Response;
    try {
      res = await router.fetch(req);
    } catch (e) {
      res = errorResponse(e);
    }
    // One line per request; never the headers (the signature is a bearer credential).
    console.log(
      `${req.method} ${new URL(req.url).pathname} ${res.status} ${(performance.now() - t0).toFixed(1)}ms`,
    );
    return res;
  };
  await serveUntilSignal(host, port, handler, ({ urlHost, port: bound }) => {
    console.log(
      `svc callbacks: listening on http://${urlHost}:${bound}${router.pathPrefix}/{callback_id}/complete|fail|heartbeat ` +
        `(${auth.kind})`,
    );
    if (auth.kind === "unsigned") {
      eprintln(
        "warning: callbacks are not authenticated (--allow-unsigned); keep this receiver on a trusted network",
      );
    }
  });
  console.log("svc callbacks: stopped");
}

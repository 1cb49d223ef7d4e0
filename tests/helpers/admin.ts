/** Test helpers for `svc serve`: the admin server in-process over a fresh schema. */
import type { Client } from "../../src/client/client.ts";
import { type AdminServer, type AdminServerOptions, createAdminServer } from "../../src/http/server.ts";
import { testClient } from "./db.ts";

/** An answer of the admin server. */
export interface Answer {
  status: number;
  body: any;
  headers: Headers;
  text: string;
}

export interface AdminFixture {
  client: Client;
  schema: string;
  app: AdminServer;
  /** Sends a request to the server's fetch handler (JSON body when `body` is not a string). */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer>;
  drop(): Promise<void>;
}

/** Lines the server logged (mutations at info, 500 details at error). */
export interface CapturedLog {
  info: string[];
  error: string[];
}

/** A migrated schema, a client with a small pool, and the admin server over it. */
export async function adminFixture(
  opts: Partial<AdminServerOptions> & { log?: CapturedLog } = {},
): Promise<AdminFixture> {
  const { client, schema, drop } = await testClient({ maxConnections: 3 });
  const log = opts.log ?? { info: [], error: [] };
  const app = createAdminServer(client, {
    callbackAuth: { kind: "unsigned" },
    logger: { info: (l: string) => log.info.push(l), error: (l: string) => log.error.push(l) },
    ...opts,
  });
  return {
    client,
    schema,
    app,
    drop,
    call: (method, path, body, headers = {}) => send(app.fetch, method, path, body, headers),
  };
}

/** Sends one request to a fetch handler and reads the answer. */
export async function send(
  fetchFn: (req: Request) => Promise<Response>,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] ??= "application/json";
  }
  const res = await fetchFn(new Request(`http://127.0.0.1${path}`, init));
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch { /* not JSON */ }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** Sets jobs' state directly (finalized now for terminal states), for tests that need every state. */
export async function setState(
  client: Client,
  ids: number[],
  state: string,
  errors: unknown[] = [],
): Promise<void> {
  await client.sql.unsafe(
    `update ${client.names.q}.jobs set state = $2::text::${client.names.q}.job_state,
        finalized_at = case when $2 in ('completed', 'failed', 'cancelled') then now() end,
        attempt = case when $2 in ('completed', 'failed', 'running') then 1 else attempt end,
        errors = $3::text::jsonb
      where id = any($1::bigint[])`,
    [ids, state, JSON.stringify(errors)],
  );
}

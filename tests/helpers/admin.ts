/** Test helpers for `svc serve`: the admin server in-process over a fresh schema. */
import type { Client } from "../../src/client/client.ts";
import { type AdminServer, type AdminServerOptions, createAdminServer } from "../../src/http/server.ts";
import assert from "node:assert/strict";
import type { Job } from "../../src/types.ts";
import type { KindPolicy } from "../../src/storage/engine.ts";
import { makeDue, TEST_ENGINE, testClient } from "./db.ts";

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

/** Runs `fn` with an admin fixture, dropping its schema whatever happens. */
export async function withApi(
  fn: (f: AdminFixture) => Promise<void>,
  opts: Partial<AdminServerOptions> & { log?: CapturedLog } = {},
): Promise<void> {
  const f = await adminFixture(opts);
  try {
    await fn(f);
  } finally {
    await f.drop();
  }
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

/**
 * Drives jobs to `completed` or `failed` through the storage engine, as workers would: each entry of
 * `errors` becomes a failed attempt (retried at once), then the last attempt completes, or fails for good
 * with the last error. Other jobs claimed on the way are given back untouched.
 */
export async function setState(
  client: Client,
  ids: number[],
  state: "completed" | "failed",
  errors: { error: string; [k: string]: unknown }[] = [],
  policies: Record<string, KindPolicy> = {},
): Promise<void> {
  for (const id of ids) {
    const attempts = state === "failed" ? Math.max(errors.length, 1) : errors.length + 1;
    for (let a = 1; a <= attempts; a++) {
      const job = await claimById(client, id, policies);
      const last = a === attempts;
      if (last && state === "completed") {
        assert.deepEqual(
          await client.engine.complete([{ id, lease: job.lease, result: null }], { keepCompleted: true }),
          [id],
        );
      } else {
        const error = errors[a - 1]?.error ?? "failed";
        const after = await client.engine.fail({
          id,
          lease: job.lease,
          error,
          terminal: last,
          retryDelayMs: 0,
        });
        assert.ok(after, `job ${id} could not be failed`);
        if (!last) {
          await makeDue(client, id);
          await client.engine.promote();
        }
      }
    }
  }
}

/**
 * Claims the job `id` for `runtimeId` (as a held job: its attempt is counted at claim), giving back the
 * others claimed with it.
 */
export async function claimById(
  client: Client,
  id: number,
  policies: Record<string, KindPolicy> = {},
  opts: { runtimeId?: string } = {},
): Promise<Job> {
  const { queue } = (await client.getJob(id))!;
  for (let i = 0; i < 1000; i++) {
    const claimed = await client.engine.claim({
      queue,
      limit: 100,
      free: 0,
      runtimeId: opts.runtimeId ?? "test-runtime",
      policies,
      callbackTimeoutsMs: {},
      prefetchTtlMs: 60_000,
    });
    const mine = claimed.find((j) => j.id === id);
    const others = claimed.filter((j) => j.id !== id);
    if (others.length) await client.engine.giveBack(others);
    if (mine) return mine;
    if (claimed.length === 0) throw new Error(`job ${id} is not available to claim`);
  }
  throw new Error(`job ${id} was never claimed`);
}

/** Moves a finished job's finalization time back by `interval` (SQL interval text), on either engine. */
export async function backdateFinished(client: Client, id: number, interval: string): Promise<void> {
  await client.sql.unsafe(
    TEST_ENGINE === "canonical"
      ? `update ${client.names.q}.jobs set finalized_at = now() - $2::interval where id = $1`
      : `with h as (update "${client.schema}_qs".history set finalized_at = now() - $2::interval where job_id = $1),
         c as (update "${client.schema}_qs".completions set at = now() - $2::interval where $1 = any(ids))
         update "${client.schema}_qs".closed set at = now() - $2::interval where job_id = $1 and outcome = 'complete'`,
    [id, interval],
  );
}

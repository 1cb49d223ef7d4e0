/** Test helpers for the HTTP surfaces: servers on 127.0.0.1:0 and pending callbacks without a worker. */
import { claim } from "./claim.ts";
import type { Client } from "../../src/client/client.ts";
import type { Job } from "../../src/types.ts";

/** A test server: its base URL (no trailing slash) and `close`. */
export interface TestServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Serves `handler` on 127.0.0.1 at a free port. */
export function serveTest(handler: (req: Request) => Response | Promise<Response>): TestServer {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handler);
  const port = server.addr.port;
  return { url: `http://127.0.0.1:${port}`, port, close: () => server.shutdown() };
}

/** A port nothing listens on (bound, then released). */
export function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * Enqueues a job, claims it as a worker would and registers an HTTP callback for the attempt;
 * `park` (default true) puts it in `waiting_external` like a 2xx from the function.
 */
export async function pendingCallback(
  client: Client,
  opts: { timeoutMs?: number; park?: boolean; maxAttempts?: number; queue?: string } = {},
): Promise<{ job: Job; callbackId: string }> {
  const queue = opts.queue ?? `q${crypto.randomUUID().slice(0, 8)}`;
  await client.enqueue("fn", { n: 1 }, { queue, maxAttempts: opts.maxAttempts ?? 25 });
  const [job] = await claim(client, queue, 1, "test-runtime", {});
  const callbackId = await client.engine.registerCallback({
    id: job.id,
    lease: job.lease,
    timeoutMs: opts.timeoutMs ?? 60_000,
    kind: "http",
  });
  if (!callbackId) throw new Error("registerCallback returned null");
  if (opts.park ?? true) await client.engine.park({ id: job.id, lease: job.lease, callbackId });
  return { job, callbackId };
}

/** POSTs JSON (or a raw string/bytes body) and returns the status and parsed JSON body. */
export async function post(
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
  method = "POST",
): Promise<{ status: number; body: any; headers: Headers }> {
  const raw = body === undefined || typeof body === "string" || body instanceof Uint8Array ||
      body instanceof ReadableStream
    ? body as BodyInit | undefined
    : JSON.stringify(body);
  const res = await fetch(url, {
    method,
    body: raw,
    headers: { "content-type": "application/json", ...headers },
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch { /* not JSON */ }
  return { status: res.status, body: parsed, headers: res.headers };
}

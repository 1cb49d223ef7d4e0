/**
 * The worker's health listener (docs/guide/operations.md, "Health"), opt-in with `healthAddr` or env SERVICE_HEALTH_ADDR:
 *
 * - `GET /healthz`: 200 while the runtime is up, graceful drain included (liveness never asks the
 *   database, so an outage does not get pods restarted).
 * - `GET /readyz`: 200 when every check passes, else 503; the same JSON body both ways:
 *   `worker.healthCheck()` (`ready` and the nine entries; `leader` never gates readiness).
 * - `GET /metrics`: the process's metrics as Prometheus text (docs/reference/metrics.md), unless the
 *   worker runs with `metrics: false` (then 404).
 * - Other paths 404, other methods 405 (HEAD is answered like GET, without a body).
 *
 * No TLS, no authentication: bind it to the pod address or loopback.
 */
import { ValidationError } from "../errors.ts";
import { type HttpServer, serveHttp } from "../platform/platform.ts";
import type { ReadinessReport } from "../types.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/registry.ts";
import { errorBody, HttpError } from "../http/errors.ts";

/** Parses `host:port` (`[::1]:9464` for IPv6; `:9464` binds every interface). */
export function parseHealthAddr(addr: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:\s]*)):(\d{1,5})$/.exec(addr.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new ValidationError(
      `invalid health listener address ${
        JSON.stringify(addr)
      }: use host:port, e.g. 127.0.0.1:9464 or [::1]:9464`,
    );
  }
  return { hostname: m[1] ?? (m[2] || "0.0.0.0"), port };
}

const json = (status: number, body: unknown, head: boolean, extra: Record<string, string> = {}): Response =>
  new Response(head ? null : JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", ...extra },
  });

/** An error answer with its status from the one error-code table (`src/http/errors.ts`). */
const refuse = (
  code: string,
  message: string,
  head: boolean,
  extra: Record<string, string> = {},
): Response => {
  const { status, body } = errorBody(new HttpError(code, message));
  return json(status, body, head, extra);
};

/** The listener's request handler (exported for tests and for mounting elsewhere). */
export function healthHandler(
  readiness: () => Promise<ReadinessReport>,
  metricsText?: () => Promise<string>,
): (req: Request) => Promise<Response> {
  return async (req) => {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && path !== "/readyz" && !(path === "/metrics" && metricsText)) {
      return refuse(
        "not_found",
        `not found: the health listener serves GET /healthz${
          metricsText ? ", GET /readyz and GET /metrics" : " and GET /readyz"
        }`,
        false,
      );
    }
    const head = req.method === "HEAD";
    if (req.method !== "GET" && !head) {
      return refuse("method_not_allowed", `method ${req.method} not allowed: use GET`, false, {
        allow: "GET, HEAD",
      });
    }
    if (path === "/healthz") return json(200, { status: "ok" }, head);
    if (path === "/metrics") {
      return new Response(head ? null : await metricsText!(), {
        headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
      });
    }
    const report = await readiness();
    return json(report.ready ? 200 : 503, report, head);
  };
}

/** Starts the listener; rejects with a ValidationError naming the fix when the address cannot be bound. */
export async function startHealthListener(
  addr: string,
  readiness: () => Promise<ReadinessReport>,
  metricsText?: () => Promise<string>,
): Promise<HttpServer> {
  const { hostname, port } = parseHealthAddr(addr);
  try {
    return await serveHttp({ hostname, port }, healthHandler(readiness, metricsText));
  } catch (e) {
    throw new ValidationError(
      `cannot start the health listener on ${addr} (${(e as Error).message}); ` +
        `set healthAddr / SERVICE_HEALTH_ADDR to a free host:port`,
    );
  }
}

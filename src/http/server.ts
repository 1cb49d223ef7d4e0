/**
 * The one router of `svc serve`: the admin REST API under `/api` (route table in
 * `admin_api/routes.ts`), the callback receiver under `/api/callbacks` (the same
 * `createCallbackRouter` as `svc callbacks serve`), and the admin UI with its client-side route
 * fallback everywhere else. CORS is permissive on `/api` unless `corsOrigins` restricts it, but a
 * mutation from another site's page is refused. Checks before a route runs, in order: read-only 503
 * `read_only` (mutating routes), 403 `cross_origin` (a POST whose Origin is neither the server's own nor
 * listed in `corsOrigins`), 401 `unauthorized` (with `authToken`, every route but capabilities, login
 * and logout). The callback routes skip all three: the receiver applies its own checks.
 */
import { Hono } from "npm:hono@4.13.19";
import type { Context } from "npm:hono@4.13.19";
import { cors } from "npm:hono@4.13.19/cors";
import type { Client } from "../client/client.ts";
import { SIGNATURE_HEADER } from "../contract/signature.ts";
import type { Logger } from "../types.ts";
import { type CallbackAuth, type CallbackRouter, createCallbackRouter } from "./callback_router.ts";
import { isCrossOrigin, type TokenAuth, tokenAuth } from "./auth.ts";
import { unauthorized } from "./admin_api/session.ts";
import { errorResponse, HttpError, json } from "./errors.ts";
import {
  type ApiRoute,
  checkValue,
  parseParam,
  readJsonObject,
  type RouteContext,
} from "./admin_api/route.ts";
import { ADMIN_ROUTES } from "./admin_api/routes.ts";
import { UiAssets } from "./ui_assets.ts";
import { svcMetrics } from "../metrics/svc_metrics.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/registry.ts";
import { depthGauges } from "../metrics/gauges.ts";
import denoJson from "../../deno.json" with { type: "json" };
import { withAdminRequest } from "../db/admin_guard.ts";

/** Options of {@link createAdminServer}. */
export interface AdminServerOptions {
  /** How callbacks are authenticated; `{ kind: "unsigned" }` when no secret is configured. */
  callbackAuth: CallbackAuth;
  /** Refuse every mutation (callbacks included) with 503 `read_only`. */
  readOnly?: boolean;
  /**
   * Origins allowed by CORS; absent or empty: any origin (`*`) for reads. These origins may also send
   * mutations; any other foreign origin's mutation is 403 `cross_origin`.
   */
  corsOrigins?: string[];
  /** A token every `/api` route but capabilities, login, logout and the callbacks requires. */
  authToken?: string;
  /** Where request lines of mutations and 500 details go (default console). */
  logger?: Pick<Logger, "info" | "error">;
  /** Folder of the built UI (default `ui/dist/` beside the sources). */
  uiDistUrl?: URL;
  /**
   * `GET /metrics` with the process's metrics as Prometheus text, behind the token when there is one
   * (default true; docs/reference/metrics.md).
   */
  metrics?: boolean;
  /**
   * The queue the admin UI's enqueue form proposes (GET /api/capabilities `default_queue`; `svc dev`
   * passes its dev queue). Default `default`, the queue the API itself enqueues to when none is given.
   */
  defaultQueue?: string;
}

/** The server: a fetch handler for `Deno.serve` or any Web-standard server. */
export interface AdminServer {
  fetch(req: Request): Promise<Response>;
  /** The routes mounted under `/api`. */
  readonly routes: readonly ApiRoute[];
  /** The callback receiver mounted under `/api/callbacks`. */
  readonly callbacks: CallbackRouter;
}

/** The svc version the API reports. */
export const VERSION: string = denoJson.version;

/** `/jobs/:id/retry` → a RegExp matching `/api/jobs/<anything>/retry`. */
function pathRegExp(path: string): RegExp {
  return new RegExp("^/api" + path.replace(/[.]/g, "\\.").replace(/:[A-Za-z_]+/g, "[^/]+") + "/?$");
}

/** Builds the router of `svc serve` over a client's pool. */
export function createAdminServer(client: Client, opts: AdminServerOptions): AdminServer {
  const readOnly = opts.readOnly ?? false;
  const logger = opts.logger ?? console;
  const origins = opts.corsOrigins ?? [];
  const metrics = opts.metrics === false ? null : svcMetrics();
  const callbacks = createCallbackRouter(client, {
    auth: opts.callbackAuth,
    readOnly,
    logger,
    metrics: metrics !== null,
  });
  // The depth gauges of the schema served, registered at the first scrape (and kept: the server lives as
  // long as its process).
  let depthRegistered = false;
  const assets = new UiAssets(opts.uiDistUrl);
  const matchers = ADMIN_ROUTES.map((r) => ({ route: r, re: pathRegExp(r.path) }));
  const auth: TokenAuth | null = opts.authToken ? tokenAuth(opts.authToken) : null;
  const isCallbackPath = (path: string) => path === "/api/callbacks" || path.startsWith("/api/callbacks/");

  const app = new Hono({ strict: false }); // a trailing slash on a route is ignored

  app.use("/api/*", async (c, next) => {
    const started = performance.now();
    await next();
    if (c.req.method !== "GET" && c.req.method !== "HEAD" && c.req.method !== "OPTIONS") {
      logger.info(
        `${c.req.method} ${c.req.path} ${c.res.status} ${Math.round(performance.now() - started)}ms`,
      );
    }
  });
  app.use(
    "/api/*",
    cors({
      origin: origins.length ? origins : "*",
      allowMethods: ["GET", "POST", "PUT", "DELETE", "OPTIONS"],
      allowHeaders: ["Content-Type", "Authorization", SIGNATURE_HEADER],
      maxAge: 600,
    }),
  );
  if (origins.length) {
    app.use("/api/*", async (c, next) => {
      await next();
      if (c.req.method !== "OPTIONS") c.res.headers.append("vary", "Origin");
    });
  }

  // The guards, in their order, before any route (the callback routes keep the receiver's own).
  app.use("/api/*", async (c, next) => {
    const req = c.req.raw;
    if (req.method === "OPTIONS" || isCallbackPath(c.req.path)) return await next();
    const route = matchers.find((m) => m.route.method === req.method && m.re.test(c.req.path))?.route;
    if (readOnly && route?.mutates) {
      throw new HttpError(
        "read_only",
        "svc serve runs read-only (--read-only / SERVICE_READ_ONLY): nothing can be changed",
      );
    }
    if (req.method !== "GET" && req.method !== "HEAD" && isCrossOrigin(req, origins)) {
      throw new HttpError(
        "cross_origin",
        `a change requested by a page of ${req.headers.get("origin")} is refused: only this server's own ` +
          "pages (and origins listed with --cors-origin) may change jobs",
      );
    }
    if (auth && !route?.open && !auth.check(req)) {
      throw unauthorized(
        "this server needs its token (--auth-token / SERVICE_AUTH_TOKEN): send Authorization: Bearer <token>, " +
          "or log in through the UI",
      );
    }
    await next();
  });

  const handle = async (r: ApiRoute, c: Context): Promise<Response> => {
    const base = {
      client,
      callbacks,
      readOnly,
      defaultQueue: opts.defaultQueue ?? "default",
      version: VERSION,
      req: c.req.raw,
      auth,
      authenticated: auth === null || auth.check(c.req.raw),
      responseHeaders: new Headers(),
      logger,
    };
    if (r.passThrough) {
      return await r.handler({ ...base, params: {}, query: {}, body: {} }) as Response;
    }
    // Bounded: a statement timeout, cancelled when the client goes away, 503 busy when the pool is taken.
    return await withAdminRequest(c.req.raw.signal, () => answer(r, c, base));
  };

  const answer = async (
    r: ApiRoute,
    c: Context,
    base: Omit<RouteContext, "params" | "query" | "body">,
  ): Promise<Response> => {
    const ctx: RouteContext = { ...base, params: {}, query: {}, body: {} };
    const url = new URL(c.req.url);
    for (const p of r.params ?? []) {
      if (p.in === "path") ctx.params[p.name] = parseParam(p, c.req.param(p.name))!;
      else ctx.query[p.name] = parseParam(p, url.searchParams.get(p.name) ?? undefined);
    }
    if (r.body) {
      const body = await readJsonObject(c.req.raw);
      checkValue("body", body, r.body);
      ctx.body = body;
    }
    return json(r.status ?? 200, await r.handler(ctx), ctx.responseHeaders);
  };

  for (const r of ADMIN_ROUTES) {
    app.on(r.method, "/api" + r.path, (c) => handle(r, c));
  }
  // Anything else under the callback prefix: the receiver's own 404/405 answers.
  app.all("/api/callbacks", (c) => callbacks.fetch(c.req.raw));
  app.all("/api/callbacks/*", (c) => callbacks.fetch(c.req.raw));
  app.all("/api/*", (c) => {
    const allowed = [...new Set(matchers.filter((m) => m.re.test(c.req.path)).map((m) => m.route.method))];
    // A path that only looks like a route (extra slashes) with an allowed method is simply not a route.
    if (allowed.length && !allowed.includes(c.req.method as ApiRoute["method"])) {
      throw new HttpError(
        "method_not_allowed",
        `${c.req.method} is not allowed on ${c.req.path}: use ${allowed.join(" or ")}`,
        { allow: [...allowed, "OPTIONS"].join(", ") },
      );
    }
    throw new HttpError(
      "not_found",
      `no API route at ${c.req.path}: see GET /api/openapi.json for the routes`,
    );
  });
  if (metrics) {
    app.on(["GET", "HEAD"], "/metrics", async (c) => {
      if (auth && !auth.check(c.req.raw)) {
        throw unauthorized("/metrics needs this server's token: send Authorization: Bearer <token>");
      }
      if (!depthRegistered) {
        depthRegistered = true;
        depthGauges(metrics, client.engine, client.schema, undefined, () => client.listQueueLimits());
      }
      const text = c.req.method === "HEAD"
        ? null
        : await withAdminRequest(c.req.raw.signal, () => metrics.registry.text());
      return new Response(text, {
        headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
      });
    });
  }
  app.on(["GET", "HEAD"], "*", (c) => assets.respond(c.req.raw, c.req.path));
  app.all("*", (c) => {
    throw new HttpError(
      "method_not_allowed",
      `${c.req.method} is not allowed on ${c.req.path}: the UI is read with GET`,
      {
        allow: "GET, HEAD",
      },
    );
  });
  app.onError((e, c) => errorResponse(e, logger, `${c.req.method} ${c.req.path}`));

  return {
    fetch: async (req) => await app.fetch(req),
    routes: ADMIN_ROUTES,
    callbacks,
  };
}

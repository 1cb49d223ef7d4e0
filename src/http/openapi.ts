/**
 * `/api/openapi.json`, generated from the admin API's route table (`src/http/admin_api/routes.ts`):
 * the paths, parameters, bodies and answers below are the ones the server mounts and validates.
 */
import type { ApiRoute, Schema } from "./admin_api/route.ts";
import { SCHEMAS } from "./admin_api/schemas.ts";
import { STATUS_BY_CODE } from "./errors.ts";

/** `/jobs/:id/retry` → `/api/jobs/{id}/retry`. */
export function openApiPath(path: string): string {
  return "/api" + path.replace(/:([A-Za-z_]+)/g, "{$1}");
}

const errorRef: Schema = { $ref: "#/components/schemas/Error" };

function errorResponses(r: ApiRoute): Record<string, unknown> {
  const codes = new Set<string>(r.errors);
  if (r.mutates) codes.add("read_only");
  if (!r.passThrough && r.body) codes.add("payload_too_large");
  if (!r.passThrough && r.method !== "GET") codes.add("cross_origin");
  if (!r.passThrough && !r.open) codes.add("unauthorized");
  // Any route that reads or changes the database: its statement timeout, or a pool with no room.
  if (!r.passThrough) codes.add("busy");
  codes.add("internal");
  const byStatus = new Map<number, string[]>();
  for (const c of codes) {
    const s = STATUS_BY_CODE[c] ?? 500;
    byStatus.set(s, [...(byStatus.get(s) ?? []), c]);
  }
  return Object.fromEntries(
    [...byStatus].sort(([a], [b]) => a - b).map(([status, cs]) => [
      String(status),
      { description: `code ${cs.join(" or ")}`, content: { "application/json": { schema: errorRef } } },
    ]),
  );
}

/** The OpenAPI 3.1 document of `routes`. */
export function openApiDocument(routes: readonly ApiRoute[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const op: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      tags: [r.tag],
    };
    if (r.params?.length) {
      op.parameters = r.params.map((p) => ({
        name: p.name,
        in: p.in,
        required: p.in === "path" || (p.required ?? false),
        description: p.description,
        schema: p.schema,
      }));
    }
    if (r.body) {
      op.requestBody = {
        required: (r.body.required?.length ?? 0) > 0,
        content: { "application/json": { schema: r.body } },
      };
    }
    op.responses = {
      [String(r.status ?? 200)]: {
        description: "success",
        content: { "application/json": { schema: r.response } },
      },
      ...errorResponses(r),
    };
    (paths[openApiPath(r.path)] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "svc admin API",
      version,
      description: "The admin REST API of `svc serve`: JSON in snake_case, times RFC 3339, ids integers. " +
        'Errors are {"error": "<message>", "code": "<code>"}. In read-only mode every mutating route answers ' +
        "503 read_only before any other check. A POST whose Origin header is another site's (not the server's " +
        "own, not listed with --cors-origin) is 403 cross_origin. When the server has a token (--auth-token), " +
        "every route but /api/capabilities, /api/login, /api/logout and the callbacks needs " +
        "Authorization: Bearer <token> or the session cookie of /api/login: else 401 unauthorized. " +
        "A trailing slash on a path is ignored.",
    },
    paths,
    components: { schemas: SCHEMAS },
  };
}

/**
 * The UI's login form: `POST /api/login` with the token of `svc serve --auth-token` sets the session
 * cookie (HttpOnly, SameSite=Strict); `POST /api/logout` clears it.
 */
import { HttpError } from "../errors.ts";
import { isHttps } from "../auth.ts";
import { route } from "./route.ts";

const sessionBody = {
  type: "object" as const,
  required: ["authenticated"],
  properties: { authenticated: { type: "boolean" as const } },
};

/** A 401 `unauthorized` with the `WWW-Authenticate` header. */
export function unauthorized(message: string): HttpError {
  return new HttpError("unauthorized", message, { "www-authenticate": 'Bearer realm="svc"' });
}

export const sessionRoutes = [
  route({
    method: "POST",
    path: "/login",
    operationId: "login",
    summary: "Open a session: the token of --auth-token in, the session cookie out (no token: nothing to do)",
    tag: "meta",
    mutates: false,
    open: true,
    body: {
      type: "object",
      required: ["token"],
      additionalProperties: false,
      properties: { token: { type: "string", minLength: 1, maxLength: 4096 } },
    },
    response: sessionBody,
    errors: ["invalid_request", "unauthorized"],
    handler({ auth, body, req, responseHeaders }) {
      if (auth) {
        if (!auth.matches(body.token as string)) throw unauthorized("wrong token");
        responseHeaders.append("set-cookie", auth.sessionCookie(isHttps(req)));
      }
      return Promise.resolve({ authenticated: true });
    },
  }),
  route({
    method: "POST",
    path: "/logout",
    operationId: "logout",
    summary: "End the session (clears the session cookie)",
    tag: "meta",
    mutates: false,
    open: true,
    response: sessionBody,
    errors: [],
    handler({ auth, req, responseHeaders }) {
      if (auth) responseHeaders.append("set-cookie", auth.clearCookie(isHttps(req)));
      return Promise.resolve({ authenticated: auth === null });
    },
  }),
];

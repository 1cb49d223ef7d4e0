/** Capabilities: what this server allows (the UI hides mutation controls when `read_only`). */
import { route } from "./route.ts";

export const capabilityRoutes = [
  route({
    method: "GET",
    path: "/capabilities",
    operationId: "getCapabilities",
    summary: "read_only, the svc version, the active storage engine and whether a token is needed",
    tag: "meta",
    mutates: false,
    open: true,
    response: {
      type: "object",
      required: ["read_only", "version", "storage", "auth_required", "authenticated"],
      properties: {
        read_only: { type: "boolean", description: "mutating routes answer 503 read_only" },
        version: { type: "string" },
        storage: { type: "string" },
        auth_required: { type: "boolean", description: "the server has a token (--auth-token)" },
        authenticated: { type: "boolean", description: "this request carries it (true without a token)" },
        default_queue: {
          type: "string",
          description: "the queue the UI's enqueue form proposes (svc dev: its dev queue; else default)",
        },
      },
    },
    errors: [],
    async handler({ client, readOnly, defaultQueue, version, auth, authenticated }) {
      const s = await client.engine.storageState();
      return {
        read_only: readOnly,
        version,
        storage: s.engine,
        auth_required: auth !== null,
        authenticated,
        default_queue: defaultQueue,
      };
    },
  }),
];

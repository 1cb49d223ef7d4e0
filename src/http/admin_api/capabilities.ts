/** Capabilities: what this server allows (the UI hides mutation controls when `read_only`). */
import { route } from "./route.ts";

export const capabilityRoutes = [
  route({
    method: "GET",
    path: "/capabilities",
    operationId: "getCapabilities",
    summary: "read_only, the svc version and the active storage engine",
    tag: "meta",
    mutates: false,
    response: {
      type: "object",
      required: ["read_only", "version", "storage"],
      properties: {
        read_only: { type: "boolean", description: "mutating routes answer 503 read_only" },
        version: { type: "string" },
        storage: { type: "string" },
      },
    },
    errors: [],
    async handler({ client, readOnly, version }) {
      const s = await client.engine.storageState();
      return { read_only: readOnly, version, storage: s.engine };
    },
  }),
];

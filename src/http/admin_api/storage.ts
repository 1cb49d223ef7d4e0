/** Storage: the active engine and the storage-transition state. */
import { route } from "./route.ts";

export const storageRoutes = [
  route({
    method: "GET",
    path: "/storage",
    operationId: "getStorage",
    summary: "Active storage engine and transition state (canonical, prepared, mixed_transition, active)",
    tag: "storage",
    mutates: false,
    response: {
      type: "object",
      required: ["engine", "transition"],
      properties: { engine: { type: "string" }, transition: { type: "string" } },
    },
    errors: [],
    async handler({ client }) {
      const s = await client.engine.storageState();
      return { engine: s.engine, transition: s.transition, queue_storage_schema: s.qsSchema };
    },
  }),
];

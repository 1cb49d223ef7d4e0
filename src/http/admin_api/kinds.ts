/** Kinds: every job kind in the table with its counts by state. */
import { ref, route } from "./route.ts";

export const kindRoutes = [
  route({
    method: "GET",
    path: "/kinds",
    operationId: "listKinds",
    summary: "Every job kind present, with its counts by state",
    tag: "kinds",
    mutates: false,
    response: {
      type: "object",
      required: ["kinds"],
      properties: {
        kinds: {
          type: "array",
          items: { type: "object", properties: { kind: { type: "string" }, counts: ref("StateCounts") } },
        },
      },
    },
    errors: [],
    async handler({ client }) {
      const k = await client.engine.kindCounts();
      return { kinds: k.kinds, approximate: k.approximate };
    },
  }),
];

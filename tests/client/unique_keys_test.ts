/**
 * Unique keys have one definition, the SQL function `unique_key()`: the committed vectors
 * (tests/fixtures/vectors/unique_keys.json, also read by the Python tests) are checked against it, and
 * the TypeScript client, which sends its unique options into the enqueue statement, gets the same keys.
 */
import assert from "node:assert/strict";
import { withSchema } from "../helpers/db.ts";

interface Vector {
  name: string;
  kind: string;
  args: Record<string, unknown> | null;
  queue: string | null;
  period_ms: number | null;
  run_at: string | null;
  key: string;
}

const { cases } = JSON.parse(
  await Deno.readTextFile(new URL("../fixtures/vectors/unique_keys.json", import.meta.url)),
) as { cases: Vector[] };

Deno.test("unique key vectors: the file has cases, each with a 64-hex key", () => {
  assert.ok(cases.length >= 10);
  for (const c of cases) assert.match(c.key, /^[0-9a-f]{64}$/, c.name);
});

Deno.test("unique key vectors: the SQL function unique_key() computes each one", () =>
  withSchema(async (_client, schema, sql) => {
    for (const c of cases) {
      const [r] = await sql.unsafe(
        `select "${schema}".unique_key($1, $2::text::jsonb, $3, $4, coalesce($5::timestamptz, now())) as k`,
        [c.kind, c.args === null ? null : JSON.stringify(c.args), c.queue, c.period_ms, c.run_at],
      );
      assert.equal(r.k, c.key, c.name);
    }
  }));

Deno.test("unique key vectors: the client's unique options give the same keys", () =>
  withSchema(async (client) => {
    for (const c of cases) {
      const job = await client.enqueue(c.kind, c.args ?? { unrelated: c.name }, {
        queue: c.queue ?? "default",
        runAt: c.run_at ? new Date(c.run_at) : undefined,
        unique: { byArgs: c.args !== null, byQueue: c.queue !== null, periodMs: c.period_ms ?? undefined },
      });
      assert.equal(job.uniqueKey, c.key, c.name);
      assert.equal(job.duplicate, undefined, c.name);
      const again = await client.enqueue(c.kind, c.args ?? { other: true }, {
        queue: c.queue ?? "default",
        runAt: c.run_at ? new Date(c.run_at) : undefined,
        unique: { byArgs: c.args !== null, byQueue: c.queue !== null, periodMs: c.period_ms ?? undefined },
      });
      assert.equal(again.duplicate, true, c.name);
      assert.equal(again.id, job.id, c.name);
      await client.cancel(job.id); // frees the key for the next case that shares it
    }
  }));

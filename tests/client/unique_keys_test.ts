/**
 * Unique keys have one definition, the SQL function `unique_key()`: the committed vectors
 * (tests/fixtures/vectors/unique_keys.json, also read by the Python tests) are checked against it, and
 * the TypeScript client, which sends its unique options into the enqueue statement, gets the same keys.
 * Keys that clients computed before schema version 4 are recomputed by the migration.
 */
import assert from "node:assert/strict";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { dropSchema, freshSchema, withSchema } from "../helpers/db.ts";
import { createClient } from "../../src/client/client.ts";
import { DATABASE_URL } from "../helpers/db.ts";
import { MIGRATIONS } from "../../src/db/schema_version.ts";
import { renderMigration } from "../../src/db/migrate.ts";

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

/** The key a client computed before schema version 4 (sorted-key JSON, no spaces, SHA-256). */
function oldKey(kind: string, args: Record<string, unknown> | null, queue: string | null): string {
  const canonical = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
    if (v !== null && typeof v === "object") {
      const o = v as Record<string, unknown>;
      return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
    }
    return JSON.stringify(v);
  };
  const parts = [`kind=${kind}`];
  if (queue !== null) parts.push(`queue=${queue}`);
  if (args !== null) parts.push(`args=${canonical(args)}`);
  return bytesToHex(sha256(new TextEncoder().encode(parts.join("\n"))));
}

Deno.test("migrating to version 4 recomputes the keys of live unique jobs; finished and period keys stay", async () => {
  const schema = freshSchema("ukmig");
  const client = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 2 });
  try {
    // A database at version 3, as the older line left it.
    await client.sql.unsafe(`create schema "${schema}"; set search_path to "${schema}"`);
    await client.sql.begin(async (tx) => {
      await tx.unsafe(`set local search_path to "${schema}", pg_catalog`);
      await tx.unsafe(
        `create table schema_migrations (version integer primary key, name text not null,
                                         applied_at timestamptz not null default now())`,
      );
      for (const m of MIGRATIONS.filter((m) => m.version <= 3)) {
        const text = await Deno.readTextFile(new URL(`../../migrations/${m.file}`, import.meta.url));
        await tx.unsafe(
          renderMigration(text, { schema: `${schema}_qs`, slots: 8, rotationMs: 30_000, shards: 4 }),
        )
          .simple();
        await tx.unsafe(`insert into schema_migrations (version, name) values ($1, $2)`, [m.version, m.file]);
      }
    });
    const args = { to: "a@example.com", n: 1, nested: { b: [1, "x"], a: true } };
    const live = [
      { kind: "mail", args, queue: null },
      { kind: "mail", args, queue: "q" },
      { kind: "sync", args: null, queue: null },
    ];
    for (const l of live) {
      await client.sql.unsafe(
        `insert into "${schema}".jobs (kind, queue, args, unique_key) values ($1, $2, $3::text::jsonb, $4)`,
        [l.kind, l.queue ?? "default", JSON.stringify(l.args ?? {}), oldKey(l.kind, l.args, l.queue)],
      );
    }
    await client.sql.unsafe(
      `insert into "${schema}".jobs (kind, args, unique_key, state) values ('mail', '{}', 'finished-key', 'completed'),
         ('mail', '{}', 'period-key-not-recomputable', 'available')`,
    );
    const r = await client.migrate();
    assert.equal(r.engine, "canonical", "a database of the older line stays canonical");
    const rows = await client.sql.unsafe(`select kind, queue, unique_key from "${schema}".jobs order by id`);
    for (let i = 0; i < live.length; i++) {
      const [k] = await client.sql.unsafe(
        `select "${schema}".unique_key($1, $2::text::jsonb, $3, null) as k`,
        [live[i].kind, live[i].args === null ? null : JSON.stringify(live[i].args), live[i].queue],
      );
      assert.equal(rows[i].unique_key, k.k, `live job ${i} got the new key`);
    }
    assert.equal(rows[3].unique_key, "finished-key");
    assert.equal(rows[4].unique_key, "period-key-not-recomputable");
    // A duplicate enqueued after the upgrade finds the job that holds the key.
    const dup = await client.enqueue("mail", args, { unique: {} });
    assert.equal(dup.duplicate, true);
  } finally {
    await client.close();
    await dropSchema(schema);
  }
});

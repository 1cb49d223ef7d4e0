/**
 * Input PostgreSQL cannot store is refused by the library with a ValidationError before anything is
 * written (NUL, lone surrogates, deep nesting, years outside 1..9999), and the shared rules of
 * `src/validation.ts` themselves: exact numbers, RFC 3339 dates, cursors.
 */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { pendingCallback } from "../helpers/http.ts";
import { ValidationError } from "../../mod.ts";
import {
  checkJsonValue,
  exactDouble,
  jsonTextProblem,
  parseJobCursor,
  parseJsonInput,
  parseRfc3339,
} from "../../src/validation.ts";

/** Each case rejects with a ValidationError whose message matches. */
async function allRefused(cases: [string, () => Promise<unknown>, RegExp][]): Promise<void> {
  for (const [name, fn, re] of cases) {
    await assert.rejects(fn, (e: Error) => {
      assert.ok(e instanceof ValidationError, `${name}: expected ValidationError, got ${e}`);
      assert.match(e.message, re, name);
      return true;
    });
  }
}

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

Deno.test("validation: numbers are taken only when a double holds exactly the value written", () => {
  for (const ok of ["0", "-0", "1", "1.0", "0.1", "9.99", "-12.5e3", "1e21", "9007199254740991", "5e-324"]) {
    assert.ok(exactDouble(ok), ok);
  }
  for (const bad of ["9007199254740993", "1e400", "-1e400", "1e-400", "0.1000000000000000000001"]) {
    assert.ok(!exactDouble(bad), bad);
  }
  assert.equal(parseJsonInput(`{"a":[1.0,0.1,"9007199254740993"]}`).ok, true);
  const r = parseJsonInput(`{"a":9007199254740993}`);
  assert.ok(!r.ok && !r.syntax && /9007199254740993 would be read as 9007199254740992/.test(r.problem));
  const s = parseJsonInput(`{"a":`);
  assert.ok(!s.ok && s.syntax);
});

Deno.test("validation: NUL and lone surrogates in strings and keys, escaped or raw; nesting over 512", () => {
  assert.equal(jsonTextProblem(`{"a":"x\\ud83d\\ude00y","b":"\u{1F600}"}`), null);
  assert.equal(jsonTextProblem(`"\\\\u0000"`), null, "an escaped backslash before u0000 is text");
  for (const bad of [`"\\u0000"`, `{"\\u0000":1}`, `["\\ud800"]`, `"\\udc00x"`, `"a\\ud800"`, `"\ud800"`]) {
    assert.match(jsonTextProblem(bad) ?? "", /NUL|lone surrogate/, bad);
  }
  assert.equal(jsonTextProblem(JSON.stringify(nested(512))), null);
  assert.match(jsonTextProblem(JSON.stringify(nested(513))) ?? "", /nested deeper than 512/);
  assert.throws(() => checkJsonValue("args", { s: "\ud800" }), ValidationError);
  // A null is taken as it is; -0 in args is stored as 0 (refused only in a result, read back as returned).
  assert.equal(checkJsonValue("args", { a: null, b: -0, c: [null] }), '{"a":null,"b":0,"c":[null]}');
  assert.throws(() => checkJsonValue("result", { b: -0 }, { exactNumbers: true }), /the number -0/);
  assert.throws(() => checkJsonValue("args", { a: null, b: NaN }), /the number NaN/);
});

Deno.test("validation: RFC 3339 times must exist, with a zone, years 0001 to 9999", () => {
  assert.equal(parseRfc3339("2026-12-01T09:00:00Z")?.toISOString(), "2026-12-01T09:00:00.000Z");
  assert.equal(parseRfc3339("2026-12-01 10:00:00.1234+01:00")?.toISOString(), "2026-12-01T09:00:00.123Z");
  assert.equal(parseRfc3339("2024-02-29T00:00:00z")?.toISOString(), "2024-02-29T00:00:00.000Z");
  assert.equal(parseRfc3339("0001-01-01T00:00:00Z")?.getUTCFullYear(), 1);
  assert.equal(parseRfc3339("9999-12-31T23:59:59Z")?.getUTCFullYear(), 9999);
  for (
    const bad of [
      "2026-02-31T00:00:00Z",
      "2025-02-29T00:00:00Z",
      "0000-01-01T00:00:00Z",
      "2026-13-01T00:00:00Z",
      "2026-12-01T24:00:00Z",
      "2026-12-01T09:00:60Z",
      "2026-12-01T09:00:00",
      "2026-12-01T09:00:00+24:00",
      "tomorrow",
      "+010000-01-01T00:00:00Z",
    ]
  ) assert.equal(parseRfc3339(bad), null, bad);
});

Deno.test("validation: cursors are base64 of id:<n> with n a positive safe integer", () => {
  assert.equal(parseJobCursor(btoa("id:42")), 42);
  for (
    const bad of [btoa("id:99999999999999999999"), btoa("id:0"), btoa("id:9007199254740993"), "%%", "aWQ6"]
  ) {
    assert.equal(parseJobCursor(bad), null, bad);
  }
});

Deno.test("enqueue: strings PostgreSQL cannot store, numbers JSON cannot carry, deep args and years outside 1..9999 are a ValidationError; nothing written", async () => {
  const { client, drop } = await testClient();
  try {
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["NUL in args", () => client.enqueue("k", { s: "a\u0000b" }), /args of k: a string contains U\+0000/],
      ["NUL in an args key", () => client.enqueue("k", { ["\u0000"]: 1 }), /U\+0000/],
      ["lone surrogate in args", () => client.enqueue("k", { s: "\ud800" }), /lone surrogate/],
      ["deep args", () => client.enqueue("k", { d: nested(600) }), /nested deeper than 512/],
      ["NUL in kind", () => client.enqueue("k\u0000", {}), /kind contains U\+0000/],
      ["lone surrogate in kind", () => client.enqueue("k\udc00", {}), /kind contains a lone surrogate/],
      ["NUL in a tag", () => client.enqueue("k", {}, { tags: ["a\u0000"] }), /tags\[0\] contains U\+0000/],
      ["NUL in metadata", () => client.enqueue("k", {}, { metadata: { m: "\u0000" } }), /metadata/],
      ["NaN in args", () => client.enqueue("k", { n: NaN }), /args of k: the number NaN has no JSON form/],
      ["Infinity deep in args", () => client.enqueue("k", { a: [{ b: Infinity }] }), /the number Infinity/],
      [
        "-Infinity in metadata",
        () => client.enqueue("k", {}, { metadata: { m: -Infinity } }),
        /metadata: .*-Infinity/,
      ],
      [
        "NaN in a batch",
        () => client.enqueueMany([{ kind: "ok" }, { kind: "k", args: { n: NaN } }]),
        /the number NaN has no JSON form/,
      ],
      [
        "year 0",
        () => client.enqueue("k", {}, { runAt: new Date("0000-06-01T00:00:00Z") }),
        /runAt must be in the years 1 to 9999/,
      ],
      [
        "year 10000",
        () => client.enqueue("k", {}, { runAt: new Date(Date.UTC(10000, 0, 1)) }),
        /years 1 to 9999/,
      ],
      [
        "one bad in a batch",
        () => client.enqueueMany([{ kind: "ok" }, { kind: "k", args: { s: "\u0000" } }]),
        /U\+0000/,
      ],
    ];
    await allRefused(cases);
    const [r] = await client.sql.unsafe(`select count(*)::int as n from ${client.names.q}.jobs`);
    assert.equal(r.n, 0);
  } finally {
    await drop();
  }
});

Deno.test("external callbacks: payloads and errors PostgreSQL cannot store are a ValidationError; the callback stays pending", async () => {
  const { client, drop } = await testClient();
  try {
    const { callbackId } = await pendingCallback(client);
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["NUL payload", () => client.completeExternal(callbackId, { s: "\u0000" }), /payload: .*U\+0000/],
      ["surrogate payload", () => client.completeExternal(callbackId, ["\udfff"]), /lone surrogate/],
      ["deep payload", () => client.completeExternal(callbackId, nested(1000)), /nested deeper/],
      ["resume with NUL", () => client.resumeExternal(callbackId, "\u0000"), /U\+0000/],
      ["NUL error", () => client.failExternal(callbackId, "bad\u0000"), /error contains U\+0000/],
      ["surrogate error", () => client.failExternal(callbackId, "\ud800"), /error contains a lone surrogate/],
    ];
    await allRefused(cases);
    assert.equal((await client.getCallback(callbackId))!.state, "pending");
  } finally {
    await drop();
  }
});

Deno.test("listJobs and bulk filters: NUL in kind, tag or q and a cursor past 2^63 are a ValidationError", async () => {
  const { client, drop } = await testClient();
  try {
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["kind", () => client.listJobs({ kind: "a\u0000" }), /kind contains U\+0000/],
      ["tag", () => client.listJobs({ tag: "\ud800" }), /tag contains a lone surrogate/],
      ["q", () => client.listJobs({ q: "\u0000" }), /q contains U\+0000/],
      ["cursor", () => client.listJobs({ cursor: btoa("id:99999999999999999999") }), /invalid cursor/],
      ["bulk kind", () => client.bulkCancel({ kind: "\u0000" }), /kind contains U\+0000/],
      ["bulk retry kind", () => client.bulkRetry({ kind: "\u0000" }), /kind contains U\+0000/],
    ];
    await allRefused(cases);
  } finally {
    await drop();
  }
});

/**
 * Valid JSON that PostgreSQL cannot store, or that a double would change, is refused at the HTTP
 * boundaries before anything reaches SQL: 400 `invalid_body` from the callback receiver (in its check
 * order, so an unknown callback id with such a body is 400 too), 400 `invalid_request` from the admin
 * API. Never a 500, and nothing changes.
 */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { pendingCallback, post, serveTest } from "../helpers/http.ts";
import { adminFixture } from "../helpers/admin.ts";
import { callbackUrl, createCallbackRouter, parseSecret, sign, SIGNATURE_HEADER } from "../../mod.ts";

const SECRET = parseSecret("5a".repeat(32));

function nestedText(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

/** Bodies of `complete` and `fail` that must be 400 invalid_body, whatever the callback. */
const BAD_CALLBACK_BODIES: [string, "complete" | "fail", string][] = [
  ["NUL in payload", "complete", `{"payload":"a\\u0000b"}`],
  ["NUL in a payload key", "complete", `{"payload":{"\\u0000":1}}`],
  ["lone high surrogate in payload", "complete", `{"payload":"\\ud800"}`],
  ["lone low surrogate in payload", "complete", `{"payload":["x\\udfff"]}`],
  ["payload nested 513 deep", "complete", `{"payload":${nestedText(513)}}`],
  ["payload nested 15000 deep", "complete", `{"payload":${nestedText(15000)}}`],
  ["integer past 2^53 in payload", "complete", `{"payload":{"n":9007199254740993}}`],
  ["1e400 in payload", "complete", `{"payload":1e400}`],
  ["NUL in error", "fail", `{"error":"boom\\u0000"}`],
  ["lone surrogate in error", "fail", `{"error":"\\udbff"}`],
];

Deno.test("receiver: unstorable payloads and errors are 400 invalid_body, for pending and unknown callbacks alike; the callback stays pending", async () => {
  const { client, drop } = await testClient();
  const router = createCallbackRouter(client, { auth: { kind: "signed", secret: SECRET } });
  const server = serveTest(router.fetch);
  try {
    const { job, callbackId } = await pendingCallback(client);
    const unknown = crypto.randomUUID();
    for (const [name, action, body] of BAD_CALLBACK_BODIES) {
      for (const id of [callbackId, unknown]) {
        const r = await post(callbackUrl(server.url, undefined, id, action), body, {
          [SIGNATURE_HEADER]: sign(SECRET, id),
        });
        assert.equal(
          r.status,
          400,
          `${name} (${id === unknown ? "unknown" : "pending"}): ${JSON.stringify(r.body)}`,
        );
        assert.equal(r.body.code, "invalid_body", name);
      }
    }
    assert.equal((await client.getCallback(callbackId))!.state, "pending");
    assert.equal((await client.getJob(job.id))!.state, "waiting_external");
    // 0.1, 9.99, 1.0 and 512 levels are fine.
    const ok = await post(
      callbackUrl(server.url, undefined, callbackId),
      `{"payload":{"a":0.1,"b":9.99,"c":1.0,"d":${nestedText(511)}}}`,
      { [SIGNATURE_HEADER]: sign(SECRET, callbackId) },
    );
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(((await client.getJob(job.id))!.result as Record<string, unknown>).c, 1);
  } finally {
    await server.close();
    await drop();
  }
});

Deno.test("admin API: NUL or lone surrogates in filters, a cursor past 2^63, unstorable or inexact bodies and impossible dates are 400 invalid_request; nothing is written", async () => {
  const f = await adminFixture();
  const server = serveTest(f.app.fetch);
  try {
    const get = async (qs: string) => {
      const r = await fetch(`${server.url}/api/jobs?${qs}`);
      return { status: r.status, body: await r.json() };
    };
    for (
      const qs of [
        "kind=a%00b",
        "tag=%00",
        "q=%00",
        "q=%ED%A0%80", // the UTF-8 bytes of U+D800 (decoded as replacement characters: fine or refused, never 500)
        `cursor=${btoa("id:99999999999999999999")}`,
        `cursor=${btoa("id:9223372036854775808")}`,
      ]
    ) {
      const r = await get(qs);
      if (qs.startsWith("q=%ED")) {
        assert.ok(r.status === 200 || r.status === 400, `${qs}: ${r.status}`);
        continue;
      }
      assert.equal(r.status, 400, `${qs}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "invalid_request", qs);
    }

    const bad: [string, string, RegExp][] = [
      ["NUL in kind", `{"kind":"a\\u0000"}`, /U\+0000/],
      ["lone surrogate in kind", `{"kind":"\\ud800"}`, /lone surrogate/],
      ["NUL in args", `{"kind":"k","args":{"s":"\\u0000"}}`, /U\+0000/],
      ["lone surrogate in a tag", `{"kind":"k","tags":["\\udc00"]}`, /lone surrogate/],
      ["NUL in metadata", `{"kind":"k","metadata":{"\\u0000":1}}`, /U\+0000/],
      ["deep args", `{"kind":"k","args":{"d":${nestedText(600)}}}`, /nested deeper than 512/],
      ["integer past 2^53", `{"kind":"k","args":{"n":9007199254740993}}`, /9007199254740993/],
      ["1e400", `{"kind":"k","args":{"n":1e400}}`, /range of a double/],
      ["1e400 priority", `{"kind":"k","priority":1e400}`, /range of a double/],
      ["run_at year 0", `{"kind":"k","run_at":"0000-01-01T00:00:00Z"}`, /run_at/],
      ["run_at February 31", `{"kind":"k","run_at":"2026-02-31T00:00:00Z"}`, /run_at/],
      ["run_at hour 25", `{"kind":"k","run_at":"2026-01-01T25:00:00Z"}`, /run_at/],
      ["run_at year 10000", `{"kind":"k","run_at":"+010000-01-01T00:00:00Z"}`, /run_at/],
      ["NUL in a bulk filter", `{"kind":"\\u0000"}`, /U\+0000/],
    ];
    for (const [name, body, re] of bad) {
      const path = name.includes("bulk") ? "/api/jobs/bulk-cancel" : "/api/jobs";
      const r = await post(`${server.url}${path}`, body);
      assert.equal(r.status, 400, `${name}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "invalid_request", name);
      assert.match(r.body.error, re, name);
    }
    assert.equal((await f.client.listJobs()).jobs.length, 0, "nothing was written");

    const ok = await post(
      `${server.url}/api/jobs`,
      `{"kind":"k","args":{"a":0.1,"b":9.99,"c":1.0},"priority":1.0,"run_at":"2024-02-29T12:00:00+01:00"}`,
    );
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.job.run_at, "2024-02-29T11:00:00.000Z");
    assert.deepEqual(ok.body.job.args, { a: 0.1, b: 9.99, c: 1 });
  } finally {
    await server.close();
    await f.drop();
  }
});

Deno.test("admin API: a body over 1 MiB is 413 payload_too_large (with or without Content-Length); bytes that are not UTF-8 are 400 invalid_request, never U+FFFD; nothing is written", async () => {
  const f = await adminFixture();
  const server = serveTest(f.app.fetch);
  try {
    const big = JSON.stringify({ kind: "k", args: { blob: "x".repeat(1024 * 1024) } });
    const declared = await post(`${server.url}/api/jobs`, big);
    assert.equal(declared.status, 413, JSON.stringify(declared.body));
    assert.equal(declared.body.code, "payload_too_large");
    assert.match(declared.body.error, /larger than 1048576 bytes/);
    // Streamed: no Content-Length, the bytes are counted as they arrive.
    const bytes = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < bytes.length; i += 65536) c.enqueue(bytes.subarray(i, i + 65536));
        c.close();
      },
    });
    const streamed = await post(`${server.url}/api/jobs/bulk-cancel`, stream);
    assert.equal(streamed.status, 413, JSON.stringify(streamed.body));
    assert.equal(streamed.body.code, "payload_too_large");

    const enc = new TextEncoder();
    const invalidUtf8: [string, Uint8Array][] = [
      [
        "a lone continuation byte in kind",
        new Uint8Array([...enc.encode('{"kind":"'), 0x80, ...enc.encode('"}')]),
      ],
      ["0xFF 0xFE in kind", new Uint8Array([...enc.encode('{"kind":"'), 0xff, 0xfe, ...enc.encode('"}')])],
      [
        "a cut 3-byte sequence in args",
        new Uint8Array([...enc.encode('{"kind":"k","args":{"s":"'), 0xe2, 0x82, ...enc.encode('"}}')]),
      ],
      [
        "an encoded surrogate (CESU-8)",
        new Uint8Array([...enc.encode('{"kind":"'), 0xed, 0xa0, 0x80, ...enc.encode('"}')]),
      ],
    ];
    for (const [name, body] of invalidUtf8) {
      const r = await post(`${server.url}/api/jobs`, body);
      assert.equal(r.status, 400, `${name}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "invalid_request", name);
      assert.match(r.body.error, /not UTF-8/, name);
    }
    assert.equal((await f.client.listJobs()).jobs.length, 0, "nothing was written");
    // Valid UTF-8 beyond ASCII is taken as sent.
    const ok = await post(
      `${server.url}/api/jobs`,
      enc.encode('{"kind":"envoi.été","args":{"s":"日本 🎉"}}'),
    );
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.job.kind, "envoi.été");
    assert.deepEqual(ok.body.job.args, { s: "日本 🎉" });
  } finally {
    await server.close();
    await f.drop();
  }
});

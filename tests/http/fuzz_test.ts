/**
 * Property-based fuzzing (fast-check) of the callback receiver and the admin API of `svc serve`, over
 * real HTTP on 127.0.0.1 against the real database. Each generated request belongs to an input class
 * whose documented answer is known (signature, id, body, storable JSON, exact numbers, dates, cursors,
 * names, origins); the test asserts that status and code, so never a 500, and that a refused request
 * changed no row (the tables are compared before and after). Bounded to run in seconds; env
 * SVC_FUZZ_RUNS (default 60) sets the runs per property for a longer search.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { adminFixture } from "../helpers/admin.ts";
import { pendingCallback, serveTest } from "../helpers/http.ts";
import { parseSecret, sign, SIGNATURE_HEADER } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";
import { JOB_STATES, TERMINAL_STATES } from "../../src/types.ts";

const SECRET = parseSecret("c3".repeat(32));
const RUNS = Number(Deno.env.get("SVC_FUZZ_RUNS") ?? 60);

/** Every row of the tables a request could change, as text. */
async function snapshot(client: Client): Promise<string> {
  const q = client.names.q;
  const qs = `"${client.schema}_qs"`;
  // Both engines' job and callback tables (queue storage's jobs through its view of every place); a refusal
  // is counted on the callback it names (rejected_count, last_rejection), which changes nothing else.
  const [r] = await client.sql.unsafe(
    `select (select coalesce(json_agg(j order by id), '[]') from ${q}.jobs j)::text as jobs,
            (select coalesce(jsonb_agg(to_jsonb(c) - 'rejected_count' - 'last_rejection' order by id), '[]')
               from ${q}.callbacks c)::text as callbacks,
            (select coalesce(json_agg(j order by id, lease), '[]') from ${qs}.jobs j)::text as qs_jobs,
            (select coalesce(jsonb_agg(to_jsonb(c) - 'rejected_count' - 'last_rejection' order by id), '[]')
               from ${qs}.callbacks c)::text as qs_callbacks,
            (select coalesce(json_agg(x order by name), '[]') from ${q}.queues x)::text as queues,
            (select coalesce(json_agg(s order by name), '[]') from ${q}.cron_schedules s)::text as cron`,
  );
  return JSON.stringify(r);
}

async function withServer(fn: (client: Client, url: string) => Promise<void>): Promise<void> {
  const f = await adminFixture({ callbackAuth: { kind: "signed", secret: SECRET } });
  const server = serveTest(f.app.fetch);
  try {
    await fn(f.client, server.url);
  } finally {
    await server.close();
    await f.drop();
  }
}

async function send(
  url: string,
  method: string,
  body: string | undefined,
  headers: Record<string, string> = {},
): Promise<{ status: number; code: string | undefined; text: string }> {
  const res = await fetch(url, { method, body, headers: { "content-type": "application/json", ...headers } });
  const text = await res.text();
  let code: string | undefined;
  try {
    code = JSON.parse(text).code;
  } catch { /* not JSON: the assertion on the status says so */ }
  return { status: res.status, code, text };
}

// ---- JSON pieces: storable ones, and each kind of refused one (as JSON text) ----

/** Whether a value holds only strings PostgreSQL can store (checked here without the code under test). */
function storable(v: unknown): boolean {
  if (typeof v === "string") return !v.includes("\u0000") && v.isWellFormed();
  if (Array.isArray(v)) return v.every(storable);
  if (v && typeof v === "object") return Object.entries(v).every(([k, x]) => storable(k) && storable(x));
  return true;
}

const goodJson = fc.jsonValue({ maxDepth: 3 }).filter(storable);
const goodObject = fc.dictionary(fc.string({ maxLength: 8 }), goodJson, { maxKeys: 4 }).filter(storable);

/** A string PostgreSQL refuses, as JSON text: with NUL, or with a lone surrogate. */
const badString = fc.tuple(
  fc.string({ maxLength: 6 }),
  fc.constantFrom("\\u0000", "\\ud800", "\\udbff", "\\udc00", "\\udfff", "\\ud83d"),
  fc.string({ maxLength: 6 }),
).map(([a, bad, b]) => `${JSON.stringify(a).slice(0, -1)}${bad}${JSON.stringify(b).slice(1)}`);

/** A number a double would change: an odd integer past 2^53, or out of range. */
const inexactNumber = fc.oneof(
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 80n }).map((n) => String(n | 1n)),
  fc.integer({ min: 309, max: 99999 }).map((e) => `1e${e}`),
  fc.integer({ min: 309, max: 99999 }).map((e) => `-2.5E+${e}`),
);

/** Arrays nested deeper than 512 around a storable value. */
const deepJson = fc.tuple(fc.integer({ min: 514, max: 3000 }), goodJson).map(([d, v]) =>
  "[".repeat(d) + JSON.stringify(v) + "]".repeat(d)
);

/** JSON text of a refused value. */
const badJson = fc.oneof(badString, inexactNumber, deepJson, badString.map((s) => `{${s}:1}`));

/** Text that is not JSON. */
const notJson = fc.oneof(
  fc.string({ maxLength: 20 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return s.trim() !== "";
    }
  }),
  fc.constantFrom("{", "[1,", '{"payload":}', "nul", "{'a':1}"),
);

// ---- The receiver ----

type Action = "complete" | "fail" | "heartbeat";

/** A body for an action and its class: valid, refused JSON, not JSON, or a field of the wrong type. */
const callbackBody = (action: Action) =>
  fc.oneof(
    {
      complete: goodJson.map((v) => ({ ok: true, text: JSON.stringify({ payload: v }) })),
      fail: fc.tuple(fc.string({ maxLength: 30 }).filter(storable), fc.boolean()).map(([e, r]) => ({
        ok: true,
        text: JSON.stringify({ error: e, retryable: r }),
      })),
      heartbeat: fc.integer({ min: 1, max: 2_592_000 }).map((t) => ({
        ok: true,
        text: JSON.stringify({ timeout_seconds: t }),
      })),
    }[action],
    badJson.map((j) => ({
      ok: false,
      text: action === "complete" ? `{"payload":${j}}` : action === "fail" ? `{"error":${j}}` : `{"x":${j}}`,
    })),
    notJson.map((t) => ({ ok: false, text: t })),
    {
      complete: fc.constant({ ok: false, text: "[1]" }),
      fail: fc.oneof(goodJson, fc.constant(null)).filter((v) => typeof v !== "string").map((v) => ({
        ok: false,
        text: JSON.stringify({ error: v }),
      })),
      heartbeat: fc.oneof(fc.integer({ min: 2_592_001 }), fc.integer({ max: 0 }), fc.double(), fc.string())
        .filter((t) => !(Number.isInteger(t) && (t as number) >= 1 && (t as number) <= 2_592_000))
        .map((t) => ({ ok: false, text: JSON.stringify({ timeout_seconds: t }) })),
    }[action],
  );

const receiverRequest = fc.constantFrom<Action>("complete", "fail", "heartbeat").chain((action) =>
  fc.record({
    action: fc.constant(action),
    target: fc.constantFrom("pending", "unknown", "not-a-uuid"),
    signature: fc.constantFrom("valid", "valid", "valid", "missing", "wrong"),
    body: callbackBody(action),
  })
);

Deno.test("fuzz: the receiver answers each input class as documented, and a refused request changes no row", () =>
  withServer(async (client, url) => {
    await fc.assert(
      fc.asyncProperty(receiverRequest, async (r) => {
        const { callbackId } = await pendingCallback(client, { queue: "fuzz" });
        const id = r.target === "pending"
          ? callbackId
          : r.target === "unknown"
          ? crypto.randomUUID()
          : "not-a-uuid";
        const headers: Record<string, string> = {};
        if (r.signature === "valid") headers[SIGNATURE_HEADER] = sign(SECRET, id);
        if (r.signature === "wrong") headers[SIGNATURE_HEADER] = sign(SECRET, crypto.randomUUID());
        const before = await snapshot(client);
        const a = await send(`${url}/api/callbacks/${id}/${r.action}`, "POST", r.body.text, headers);
        const [status, code] = r.signature === "missing"
          ? [401, "missing_signature"]
          : r.signature === "wrong"
          ? [401, "invalid_signature"]
          : r.target === "not-a-uuid"
          ? [400, "invalid_callback_id"]
          : !r.body.ok
          ? [400, "invalid_body"]
          : r.target === "unknown"
          ? [404, "callback_not_found"]
          : [200, undefined];
        assert.equal(a.status, status, `${JSON.stringify(r)} → ${a.text}`);
        assert.equal(a.code, code, a.text);
        if (status !== 200) assert.equal(await snapshot(client), before, "a refused request changed rows");
      }),
      { numRuns: RUNS },
    );
  }));

// ---- The admin API ----

/** A field of a new job: valid text, or text with its documented refusal. */
const kindField = fc.oneof(
  fc.string({ minLength: 1, maxLength: 20 }).filter(storable).map((k) => ({
    ok: true,
    text: JSON.stringify(k),
  })),
  badString.map((t) => ({ ok: false, text: t })),
  fc.constantFrom('""', "5", "null", JSON.stringify("k".repeat(256))).map((t) => ({ ok: false, text: t })),
);
const argsField = fc.oneof(
  goodObject.map((o) => ({ ok: true, text: JSON.stringify(o) })),
  badJson.map((j) => ({ ok: false, text: `{"a":${j}}` })),
  fc.constantFrom("[]", '"x"', "1").map((t) => ({ ok: false, text: t })),
);
const priorityField = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 4 }), fc.constantFrom("", ".0", "e0", ".000")).map(([p, tail]) => ({
    ok: true,
    text: `${p}${tail}`,
  })),
  fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 5 })).map((p) => ({ ok: false, text: String(p) })),
  inexactNumber.map((t) => ({ ok: false, text: t })),
  fc.constantFrom("1.5", '"1"').map((t) => ({ ok: false, text: t })),
);
const pad = (n: number, w: number) => String(n).padStart(w, "0");
const runAtField = fc.oneof(
  fc.date({
    min: new Date("0001-01-01T00:00:00Z"),
    max: new Date("9999-12-31T23:59:59Z"),
    noInvalidDate: true,
  })
    .map((d) => ({ ok: true, text: JSON.stringify(d.toISOString()) })),
  fc.record({
    y: fc.integer({ min: 1, max: 9999 }),
    m: fc.integer({ min: 1, max: 12 }),
    d: fc.integer({ min: 29, max: 31 }),
  }).filter(({ y, m, d }) => d > new Date(Date.UTC(2000, m, 0)).getUTCDate() + (m === 2 && !leap(y) ? -1 : 0))
    .map(({ y, m, d }) => ({
      ok: false,
      text: JSON.stringify(`${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}T00:00:00Z`),
    })),
  fc.constantFrom(
    "0000-01-01T00:00:00Z",
    "2026-02-31T12:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T00:00:00",
    "+010000-01-01T00:00:00Z",
    "tomorrow",
  ).map((t) => ({ ok: false, text: JSON.stringify(t) })),
);
function leap(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

const enqueueRequest = fc.record({
  kind: kindField,
  args: fc.option(argsField, { nil: undefined }),
  priority: fc.option(priorityField, { nil: undefined }),
  run_at: fc.option(runAtField, { nil: undefined }),
  tags: fc.option(
    fc.oneof(
      fc.array(fc.string({ maxLength: 5 }).filter(storable), { maxLength: 3 }).map((t) => ({
        ok: true,
        text: JSON.stringify(t),
      })),
      badString.map((s) => ({ ok: false, text: `[${s}]` })),
    ),
    { nil: undefined },
  ),
});

Deno.test("fuzz: POST /api/jobs takes exactly the valid bodies (201) and refuses the rest with 400, writing nothing", () =>
  withServer(async (client, url) => {
    await fc.assert(
      fc.asyncProperty(enqueueRequest, async (r) => {
        const fields = Object.entries(r).filter(([, v]) => v !== undefined) as [
          string,
          { ok: boolean; text: string },
        ][];
        const body = `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${v.text}`).join(",")}}`;
        const valid = fields.every(([, v]) => v.ok);
        const before = await snapshot(client);
        const a = await send(`${url}/api/jobs`, "POST", body);
        if (valid) {
          assert.equal(a.status, 201, `${body} → ${a.text}`);
        } else {
          assert.equal(a.status, 400, `${body} → ${a.text}`);
          assert.equal(a.code, "invalid_request");
          assert.equal(await snapshot(client), before, "a refused enqueue changed rows");
        }
      }),
      { numRuns: RUNS * 2 },
    );
  }));

/** Query parameters of GET /api/jobs with the answer each should get. */
const listQuery = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }).map((s) => ({
    qs: `kind=${encodeURIComponent(s)}`,
    ok: !s.includes("\u0000") && s.length <= 255,
  })),
  fc.string({ unit: "binary", maxLength: 12 }).map((s) => ({
    qs: `tag=${encodeURIComponent(s)}`,
    ok: !s.includes("\u0000"),
  })),
  fc.string({ unit: "binary", maxLength: 220 }).map((s) => ({
    qs: `q=${encodeURIComponent(s)}`,
    ok: !s.includes("\u0000") && s.length <= 200,
  })),
  fc.bigInt({ min: -5n, max: 2n ** 70n }).map((n) => ({
    qs: `cursor=${encodeURIComponent(btoa(`id:${n}`).replace(/=+$/, ""))}`,
    ok: n >= 1n && n <= BigInt(Number.MAX_SAFE_INTEGER),
  })),
  fc.string({ maxLength: 30 }).filter((s) => !/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s === "").map((s) => ({
    qs: `cursor=${encodeURIComponent(s)}`,
    ok: s === "",
  })),
  fc.oneof(fc.integer({ min: -10, max: 1100 }).map(String), fc.constantFrom("1e3", "10.0", "x", "")).map(
    (l) => ({
      qs: `limit=${encodeURIComponent(l)}`,
      ok: l === "" || (/^\d+$/.test(l) && +l >= 1 && +l <= 1000),
    }),
  ),
  // The UTF-8 bytes of a lone surrogate are not UTF-8: decoded as replacement characters, they are text.
  fc.constantFrom("%ED%A0%80", "%ED%BF%BF").map((b) => ({ qs: `q=${b}`, ok: true })),
);

Deno.test("fuzz: GET /api/jobs filters and cursors: 200 or 400 invalid_request, as documented", () =>
  withServer(async (client, url) => {
    await client.enqueueMany([{ kind: "a", args: { x: 1 } }, { kind: "b", tags: ["t"] }]);
    await fc.assert(
      fc.asyncProperty(listQuery, async ({ qs, ok }) => {
        const a = await send(`${url}/api/jobs?${qs}`, "GET", undefined);
        assert.equal(a.status, ok ? 200 : 400, `${qs} → ${a.text}`);
        if (!ok) assert.equal(a.code, "invalid_request");
      }),
      { numRuns: RUNS * 2 },
    );
  }));

/** A mutation of one job or queue that must be refused: its path, headers and expected answer. */
const refusedMutation = fc.oneof(
  // Ids that are not ids, and ids of no job.
  fc.oneof(
    // "." and ".." are path segments a URL resolves away ("/api/jobs/./retry" is "/api/jobs/retry").
    fc.string({ maxLength: 12 }).filter((s) =>
      !/^\d+$/.test(s) && s !== "" && !s.includes("/") && s !== "." && s !== ".."
    ),
    fc.bigInt({ min: 2n ** 53n, max: 2n ** 80n }).map(String),
    fc.constantFrom("0", "-1", "1.5", "1e3"),
  ).chain((id) =>
    fc.constantFrom("retry", "cancel").map((verb) => ({
      path: `/api/jobs/${encodeURIComponent(id)}/${verb}`,
      headers: {},
      answer: [400, "invalid_request"] as const,
    }))
  ),
  fc.integer({ min: 1_000_000, max: Number.MAX_SAFE_INTEGER }).chain((id) =>
    fc.constantFrom("retry", "cancel").map((verb) => ({
      path: `/api/jobs/${id}/${verb}`,
      headers: {},
      answer: [404, "not_found"] as const,
    }))
  ),
  // Queue names: malformed (400), or valid but unknown (404 without create).
  fc.string({ unit: "binary", minLength: 1, maxLength: 60 }).filter((s) => !/^[A-Za-z0-9_.-]{1,48}$/.test(s))
    .chain((name) =>
      fc.constantFrom("pause", "resume").map((verb) => ({
        path: `/api/queues/${encodeURIComponent(name)}/${verb}`,
        headers: {},
        answer: [name.includes("/") || name === "." || name === ".." ? 404 : 400, undefined] as const,
      }))
    ),
  fc.stringMatching(/^[A-Za-z0-9_.-]{1,48}$/).filter((s) => s !== "." && s !== ".." && s !== "known").chain((
    name,
  ) =>
    fc.constantFrom("pause", "resume").map((verb) => ({
      path: `/api/queues/${name}/${verb}`,
      headers: {},
      answer: [404, "not_found"] as const,
    }))
  ),
  // Any change from another site's page.
  fc.tuple(
    fc.webUrl().map((u) => new URL(u).origin).filter((o) => o !== "null"),
    fc.constantFrom("/api/jobs/1/cancel", "/api/queues/known/pause", "/api/jobs/bulk-cancel", "/api/jobs"),
  ).map(([origin, path]) => ({ path, headers: { origin }, answer: [403, "cross_origin"] as const })),
);

Deno.test("fuzz: refused job, queue and cross-site mutations answer as documented and change no row", () =>
  withServer(async (client, url) => {
    await client.enqueue("k", {}, { queue: "known" });
    await fc.assert(
      fc.asyncProperty(refusedMutation, async (m) => {
        const before = await snapshot(client);
        const a = await send(`${url}${m.path}`, "POST", undefined, m.headers);
        assert.equal(a.status, m.answer[0], `${JSON.stringify(m)} → ${a.text}`);
        if (m.answer[1]) assert.equal(a.code, m.answer[1], a.text);
        assert.notEqual(a.status, 500);
        assert.equal(await snapshot(client), before, "a refused request changed rows");
      }),
      { numRuns: RUNS * 2 },
    );
  }));

/** Query strings of the operator pages' reads (running now, samples, kinds), with the answer each should get. */
const opsQuery = fc.oneof(
  fc.oneof(
    fc.integer({ min: -10, max: 1100 }).map(String),
    fc.constantFrom("1e3", "10.0", "x", "", "99999999999999999999"),
  )
    .map((l) => ({
      path: `/api/running?limit=${encodeURIComponent(l)}`,
      ok: l === "" || (/^\d+$/.test(l) && +l >= 1 && +l <= 1000),
    })),
  fc.oneof(fc.integer({ min: -10, max: 20_000 }).map(String), fc.constantFrom("1e3", "0x10", "x", "", "1.5"))
    .map((m) => ({
      path: `/api/stats/samples?minutes=${encodeURIComponent(m)}`,
      ok: m === "" || (/^\d+$/.test(m) && +m >= 1 && +m <= 10_080),
    })),
  fc.string({ unit: "binary", maxLength: 60 }).map((s) => ({
    path: `/api/stats/samples?queue=${encodeURIComponent(s)}`,
    ok: s === "" || /^[A-Za-z0-9_.-]{1,48}$/.test(s),
  })),
  fc.string({ unit: "binary", maxLength: 12 }).map((s) => ({
    path: `/api/stats/samples?kind=${encodeURIComponent(s)}`,
    ok: !s.includes("\u0000") && s.length <= 255,
  })),
  fc.constantFrom("%ED%A0%80", "%00", "%FF").map((b) => ({
    path: `/api/stats/samples?kind=${b}`,
    ok: b !== "%00",
  })),
  fc.constant({ path: "/api/kinds", ok: true }),
);

Deno.test("fuzz: running, samples and kinds reads: 200 or 400 invalid_request, as documented", () =>
  withServer(async (client, url) => {
    await client.enqueueMany([{ kind: "a", args: { x: 1 } }, { kind: "b", tags: ["t"] }]);
    await fc.assert(
      fc.asyncProperty(opsQuery, async ({ path, ok }) => {
        const a = await send(`${url}${path}`, "GET", undefined);
        assert.equal(a.status, ok ? 200 : 400, `${path} → ${a.text}`);
        if (!ok) assert.equal(a.code, "invalid_request");
      }),
      { numRuns: RUNS * 2 },
    );
  }));

/** A bulk filter field: valid, or each kind of refused value, as JSON text. */
const bulkField = {
  state: fc.oneof(
    fc.constantFrom(...JOB_STATES).map((s) => ({ ok: true, text: JSON.stringify(s) })),
    fc.string({ maxLength: 8 }).filter((s) => !(JOB_STATES as readonly string[]).includes(s))
      .map((s) => ({ ok: false, text: JSON.stringify(s) })),
    badString.map((t) => ({ ok: false, text: t })),
  ),
  kind: fc.oneof(
    fc.string({ minLength: 1, maxLength: 10 }).filter(storable).map((s) => ({
      ok: true,
      text: JSON.stringify(s),
    })),
    fc.constantFrom('""', "1", "null", "[]", "{}").map((t) => ({ ok: false, text: t })),
    badString.map((t) => ({ ok: false, text: t })),
  ),
  queue: fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9_.-]{1,48}$/).map((s) => ({ ok: true, text: JSON.stringify(s) })),
    fc.string({ unit: "binary", maxLength: 60 }).filter((s) => !/^[A-Za-z0-9_.-]{1,48}$/.test(s))
      .map((s) => ({ ok: false, text: JSON.stringify(s) })),
  ),
  dry_run: fc.oneof(
    fc.boolean().map((b) => ({ ok: true, text: String(b) })),
    fc.constantFrom('"true"', "1", "null", "[]").map((t) => ({ ok: false, text: t })),
  ),
  extra: fc.constantFrom('"x"', "1").map((t) => ({ ok: false, text: t })),
};

Deno.test("fuzz: bulk retry and cancel bodies: 200 with a count or 400; refused and dry runs change no row", () =>
  withServer(async (client, url) => {
    await client.enqueueMany([{ kind: "a" }, { kind: "b", queue: "q2" }, { kind: "c" }]);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("retry", "cancel"),
        fc.record(bulkField, { requiredKeys: [] }),
        async (verb, r) => {
          let fields = Object.entries(r) as [string, { ok: boolean; text: string }][];
          const fieldsOk = fields.every(([, v]) => v.ok);
          // A body that would be taken is sent as a dry run, so that the jobs stay to be matched.
          if (fieldsOk) {
            fields = [...fields.filter(([k]) => k !== "dry_run"), ["dry_run", { ok: true, text: "true" }]];
          }
          const body = `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${v.text}`).join(",")}}`;
          // A state the verb never applies to is refused too.
          const state = r.state?.ok ? JSON.parse(r.state.text) : undefined;
          const terminal = (TERMINAL_STATES as readonly string[]).includes(state);
          const stateOk = state === undefined || (verb === "retry" ? terminal : !terminal);
          const before = await snapshot(client);
          const a = await send(`${url}/api/jobs/bulk-${verb}`, "POST", body);
          if (fieldsOk && stateOk) {
            assert.equal(a.status, 200, `${verb} ${body} → ${a.text}`);
            const count = JSON.parse(a.text).count;
            assert.ok(Number.isInteger(count) && count >= 0, a.text);
          } else {
            assert.equal(a.status, 400, `${verb} ${body} → ${a.text}`);
            assert.equal(a.code, "invalid_request", a.text);
          }
          assert.equal(await snapshot(client), before, `${verb} ${body} changed rows`);
        },
      ),
      { numRuns: RUNS * 2 },
    );
  }));

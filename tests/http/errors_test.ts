/** The one error → HTTP answer mapping: statuses, the `{error, code}` body, and 500s that hide their details. */
import assert from "node:assert/strict";
import { errorBody, errorResponse, HttpError, STATUS_BY_CODE } from "../../src/http/errors.ts";
import {
  CallbackNotFoundError,
  CallbackNotPendingError,
  InvalidStateError,
  JobNotFoundError,
  SchemaOutdatedError,
  SvcError,
  UniqueConflictError,
  ValidationError,
} from "../../mod.ts";

Deno.test("svc errors map to their status with {error, code}", () => {
  const id = crypto.randomUUID();
  const cases: [Error, number, string][] = [
    [new ValidationError("bad"), 400, "invalid_request"],
    [new JobNotFoundError(7), 404, "not_found"],
    [new CallbackNotFoundError(id), 404, "callback_not_found"],
    [new CallbackNotPendingError(id, "completed"), 409, "callback_not_pending"],
    [new InvalidStateError("no"), 409, "invalid_state"],
    [new UniqueConflictError(3, "k"), 409, "unique_conflict"],
    [new SchemaOutdatedError(null, 1), 503, "schema_outdated"],
    [new HttpError("payload_too_large", "big"), 413, "payload_too_large"],
    [new HttpError("missing_signature", "sig"), 401, "missing_signature"],
    [new HttpError("read_only", "ro"), 503, "read_only"],
  ];
  for (const [e, status, code] of cases) {
    const r = errorBody(e);
    assert.equal(r.status, status, code);
    assert.deepEqual(r.body, { error: e.message, code });
    assert.equal(STATUS_BY_CODE[code], status);
  }
});

Deno.test("unknown errors and unknown codes are 500 internal; the details are logged, not answered", async () => {
  const logged: string[] = [];
  const logger = { error: (...a: unknown[]) => logged.push(a.join(" ")) };
  for (const e of [new Error("password=hunter2 at db"), new SvcError("weird", "no_such_code"), "a string"]) {
    const res = errorResponse(e, logger, "POST /x");
    assert.equal(res.status, 500);
    assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
    const body = await res.json();
    assert.equal(body.code, "internal");
    assert.doesNotMatch(body.error, /hunter2|weird|a string/);
  }
  assert.equal(logged.length, 3);
  assert.match(logged[0], /POST \/x.*hunter2/);
});

Deno.test("HttpError headers are sent (Allow on a 405)", async () => {
  const res = errorResponse(new HttpError("method_not_allowed", "use POST", { allow: "POST" }));
  assert.equal(res.status, 405);
  assert.equal(res.headers.get("allow"), "POST");
  assert.deepEqual(await res.json(), { error: "use POST", code: "method_not_allowed" });
});

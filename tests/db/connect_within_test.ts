/**
 * The first connection's retry rule (src/db/connection.ts): a probe that fails because the server refused,
 * reset or closed the connection under it (a restart between two statements: EPIPE), or is starting or
 * shutting down, is tried again until the deadline; any other error is final at once.
 */
import assert from "node:assert/strict";
import { connectWithin } from "../../src/db/connection.ts";
import { ConnectTimeoutError } from "../../src/errors.ts";

const coded = (code: string) => Object.assign(new Error(`failed with ${code}`), { code });

Deno.test("connectWithin: refusals, resets, EPIPE and a server starting up are tried again until the probe answers", async () => {
  for (const code of ["ECONNREFUSED", "ECONNRESET", "EPIPE", "CONNECTION_CLOSED", "57P01", "57P03"]) {
    let calls = 0;
    const v = await connectWithin(() => ++calls < 3 ? Promise.reject(coded(code)) : Promise.resolve("up"), {
      timeoutMs: 5_000,
      target: "127.0.0.1:1/x",
      fix: "fix",
      end: () => Promise.resolve(),
    });
    assert.equal(v, "up", code);
    assert.equal(calls, 3, code);
  }
});

Deno.test("connectWithin: any other error is final at once; a probe that keeps failing meets the deadline", async () => {
  let calls = 0;
  await assert.rejects(
    connectWithin(() => (calls++, Promise.reject(coded("28P01"))), {
      timeoutMs: 5_000,
      target: "127.0.0.1:1/x",
      fix: "fix",
      end: () => Promise.resolve(),
    }),
    /failed with 28P01/,
  );
  assert.equal(calls, 1);
  let ended = false;
  await assert.rejects(
    connectWithin(() => Promise.reject(coded("EPIPE")), {
      timeoutMs: 600,
      target: "127.0.0.1:1/x",
      fix: "fix",
      end: () => Promise.resolve(void (ended = true)),
    }),
    (e) => e instanceof ConnectTimeoutError,
  );
  assert.ok(ended, "the pool is ended when the deadline wins");
});

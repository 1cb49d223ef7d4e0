/**
 * The fixes of the vendored postgres.js (src/vendor/postgres/README.md), on a socket of our own (the
 * driver's `socket` option), so the order of socket events is exact: here a reset reported after the
 * connection closed, as Deno reported one when PostgreSQL stopped immediately.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import postgres from "../../src/vendor/postgres/index.js";

/** Enough of a net.Socket for the driver: it records writes and never answers. */
class FakeSocket extends EventEmitter {
  readyState = "open";
  writes = 0;
  write(_chunk: unknown, cb?: () => void): boolean {
    this.writes++;
    cb?.();
    return true;
  }
  end(): void {
    this.readyState = "closed";
  }
  destroy(): void {
    this.readyState = "closed";
  }
  setKeepAlive(): void {}
  setNoDelay(): void {}
  connect(): void {}
}

Deno.test("vendored postgres.js: a reset reported after the socket closed is not an error nobody handles", async () => {
  const made: FakeSocket[] = [];
  // `socket` is an option of the driver that its published types leave out.
  const sql = postgres(
    "postgres://u@127.0.0.1:1/db",
    {
      max: 1,
      connect_timeout: 5,
      onnotice: () => {},
      socket: () => {
        const s = new FakeSocket();
        made.push(s);
        return s;
      },
    } as Parameters<typeof postgres>[1],
  );
  // A query makes the driver open its connection on our socket; it stays unanswered.
  const q = sql`select 1`.catch((e: Error) => e);
  try {
    for (let i = 0; i < 100 && !made[0]?.writes; i++) await new Promise((r) => setTimeout(r, 10));
    const s = made[0];
    assert.ok(s && s.writes > 0, "the driver wrote its startup message");
    s.emit("close", false);
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    // Without a listener left, EventEmitter throws the error from emit(), where in a real socket nothing
    // could catch it.
    assert.doesNotThrow(() => s.emit("error", reset));
  } finally {
    await sql.end({ timeout: 0 }).catch(() => {});
    await q;
  }
});

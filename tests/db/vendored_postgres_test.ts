/**
 * The fixes of the vendored postgres.js (src/vendor/postgres/README.md), on a socket of our own (the
 * driver's `socket` option), so the order of socket events is exact: a reset reported after the connection
 * closed (as Deno reported one when PostgreSQL stopped immediately), a reset during the array-type fetch, and
 * a query written after the socket closed (the `nextWrite` change). Each fails on the unpatched 3.4.9.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { Buffer } from "node:buffer";
import postgres from "../../src/vendor/postgres/index.js";

/** Enough of a net.Socket for the driver: it records writes and answers only through `onWrite`. */
class FakeSocket extends EventEmitter {
  readyState = "open";
  writes = 0;
  constructor(private readonly onWrite: (s: FakeSocket) => void = () => {}) {
    super();
  }
  write(_chunk: unknown, cb?: () => void): boolean {
    this.writes++;
    cb?.();
    this.onWrite(this);
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

/** The vendored driver on sockets of our own (`made` collects them); `socket` is an option its types leave out. */
function driverOn(made: FakeSocket[], onWrite?: (s: FakeSocket) => void) {
  return postgres(
    "postgres://u@127.0.0.1:1/db",
    {
      max: 1,
      connect_timeout: 5,
      onnotice: () => {},
      socket: () => {
        const s = new FakeSocket(onWrite);
        made.push(s);
        return s;
      },
    } as Parameters<typeof postgres>[1],
  );
}

/** AuthenticationOk, then ReadyForQuery (idle): a server that accepts the login. */
const LOGIN = [82, 0, 0, 0, 8, 0, 0, 0, 0, 90, 0, 0, 0, 5, 73];

/** The answer to the driver's array-type query: no rows (ParseComplete, BindComplete, NoData, SELECT 0, ready). */
function noRows(): number[] {
  const tag = [...new TextEncoder().encode("SELECT 0"), 0];
  return [
    49,
    0,
    0,
    0,
    4,
    50,
    0,
    0,
    0,
    4,
    110,
    0,
    0,
    0,
    4,
    67,
    0,
    0,
    0,
    4 + tag.length,
    ...tag,
    90,
    0,
    0,
    0,
    5,
    73,
  ];
}

/** What escapes to the runtime (uncaught errors, unhandled rejections) until `stop`. */
function escapes(): { seen: unknown[]; stop: () => void } {
  const seen: unknown[] = [];
  const onError = (e: ErrorEvent) => {
    e.preventDefault();
    seen.push(e.error);
  };
  const onRejection = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    seen.push(e.reason);
  };
  globalThis.addEventListener("error", onError);
  globalThis.addEventListener("unhandledrejection", onRejection);
  return {
    seen,
    stop: () => {
      globalThis.removeEventListener("error", onError);
      globalThis.removeEventListener("unhandledrejection", onRejection);
    },
  };
}

Deno.test("vendored postgres.js: a reset reported after the socket closed is not an error nobody handles", async () => {
  const made: FakeSocket[] = [];
  const sql = driverOn(made);
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

Deno.test("vendored postgres.js: a connection reset while it fetches array types leaves no unhandled rejection", async () => {
  // The server accepts the login, then the connection is reset when the driver sends its own first query
  // (the array types), as a restarting server can do.
  const made: FakeSocket[] = [];
  const escaped = escapes();
  const sql = driverOn(made, (s) => {
    if (s.writes === 1) {
      setTimeout(() => s.emit("data", Buffer.from(LOGIN)), 0);
    } else if (s.writes === 2) {
      const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
      setTimeout(() => {
        s.emit("error", reset);
        s.emit("close", true);
      }, 0);
    }
  });
  try {
    const outcome = await sql`select 1`.then(() => "answered", (e: Error) => e);
    assert.ok(outcome instanceof Error, "the query fails with its connection");
    assert.ok(made[0] && made[0].writes >= 2, "the driver sent its array-type query");
    // Give a rejection of the driver's own query time to surface if nothing handles it.
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(escaped.seen.map(String), []);
  } finally {
    escaped.stop();
    await sql.end({ timeout: 0 }).catch(() => {});
  }
});

Deno.test("vendored postgres.js: a query on a reserved connection whose socket closed fails with CONNECTION_CLOSED instead of throwing from a timer", async () => {
  // porsager/postgres#1208, the nextWrite change: the query's write is queued for the next turn
  // (setImmediate) on a connection whose socket is gone; 3.4.9 then calls write on null from the timer
  // callback (an uncaught TypeError that ends the process) and the query never settles. The server here
  // accepts the login and answers the array-type query, then closes the idle reserved connection.
  const made: FakeSocket[] = [];
  const escaped = escapes();
  const sql = driverOn(made, (s) => {
    const reply = s.writes === 1 ? LOGIN : s.writes === 2 ? noRows() : null;
    if (reply) setTimeout(() => s.emit("data", Buffer.from(reply)), 0);
  });
  try {
    const reserved = await sql.reserve();
    assert.equal(made.length, 1);
    const writesBefore = made[0].writes;
    made[0].emit("close", false);
    const outcome = await Promise.race([
      reserved`select 1`.then(() => "answered", (e: Error) => e),
      new Promise((r) => setTimeout(() => r("still pending after 2 s"), 2_000)),
    ]);
    assert.ok(outcome instanceof Error, `the query failed (got ${String(outcome)})`);
    assert.equal((outcome as Error & { code?: string }).code, "CONNECTION_CLOSED");
    assert.equal(made[0].writes, writesBefore, "nothing was written to the closed socket");
    // An error thrown from the timer would have been reported by now (it ran before the query settled).
    assert.deepEqual(escaped.seen.map(String), []);
    reserved.release();
  } finally {
    escaped.stop();
    await sql.end({ timeout: 0 }).catch(() => {});
  }
});

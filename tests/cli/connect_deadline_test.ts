/**
 * An address that answers but is not PostgreSQL (a TCP server on 127.0.0.1 that writes a line and
 * closes): postgres.js would reconnect to it forever. Every CLI command that connects, `serve`,
 * `callbacks serve`, `svc dev` on a database URL and a worker's `start()` give up after their connect
 * deadline with one line naming the fix, and stop connecting.
 */
import assert from "node:assert/strict";
import { ConnectTimeoutError, createClient, createWorker, silentLogger } from "../../mod.ts";
import { DATABASE_URL, testClient } from "../helpers/db.ts";
import { closedPort } from "../helpers/http.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

/**
 * A TCP server that reads what a connection sends, answers a line of text and closes it (as an HTTP
 * server answers 400 to a PostgreSQL startup message); counts connections. `early`: it answers and
 * closes without reading first.
 */
function notPostgres(early = false): { url: string; connections: () => number; close(): Promise<void> } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let n = 0;
  const reply = new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n");
  const answer = async (c: Deno.Conn) => {
    try {
      if (!early) await c.read(new Uint8Array(4096));
      await c.write(reply);
    } catch { /* the client went first */ }
    try {
      c.close();
    } catch { /* already closed */ }
  };
  const loop = (async () => {
    for await (const c of listener) {
      n++;
      answer(c);
    }
  })();
  return {
    url: `postgres://postgres@127.0.0.1:${(listener.addr as Deno.NetAddr).port}/postgres`,
    connections: () => n,
    async close() {
      listener.close();
      await loop.catch(() => {});
    },
  };
}

/** Runs `svc <args>`, killed after `limitMs` (so that a hang fails the test instead of stalling it). */
async function svcWithin(args: string[], env: Record<string, string>, limitMs: number) {
  const t0 = performance.now();
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    env: { NO_COLOR: "1", DATABASE_URL, ...env },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(limitMs),
  }).output();
  return {
    code: out.code,
    signal: out.signal,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
    ms: performance.now() - t0,
  };
}

Deno.test("CLI: every connecting command gives up on an address that answers but is not PostgreSQL (--connect-timeout, default 5 s)", async () => {
  const server = notPostgres();
  try {
    const commands: string[][] = [
      ["job", "list"],
      ["queue", "list"],
      ["migrate", "--status"],
      ["cron", "list"],
      ["health"],
      ["serve", "--port", "0"],
      ["callbacks", "serve", "--port", "0", "--allow-unsigned"],
      ["dev", "--port", "0"],
    ];
    const runs = await Promise.all([
      ...commands.map((c) =>
        svcWithin([...c, "--connect-timeout", "1"], { DATABASE_URL: server.url }, 30_000)
      ),
      // The option before the command, and the 5 s default.
      svcWithin(["--connect-timeout", "2", "storage", "status"], { DATABASE_URL: server.url }, 30_000),
      svcWithin(["job", "list"], { DATABASE_URL: server.url }, 30_000),
    ]);
    runs.forEach((r, i) => {
      const what = (commands[i] ?? ["(default)"]).join(" ");
      assert.equal(r.signal, null, `${what}: hung until killed`);
      assert.equal(r.code, 1, `${what}: ${r.stderr}`);
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.length, 1, `${what}: one line, got ${r.stderr}`);
      assert.match(
        lines[0],
        /^error: no PostgreSQL answered at 127\.0\.0\.1:\d+\/postgres within \d s .*check --database-url \/ DATABASE_URL.*--connect-timeout/,
        what,
      );
    });
    assert.match(runs[commands.length].stderr, /within 2 s/);
    assert.match(runs[commands.length + 1].stderr, /within 5 s/);
    assert.ok(runs[commands.length + 1].ms >= 4_500, "the default is 5 s");
    // Nothing keeps connecting once they have given up.
    const settled = server.connections();
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(server.connections() - settled <= 2, `still connecting: ${server.connections() - settled}`);
  } finally {
    await server.close();
  }
});

Deno.test("CLI: an address that closes before PostgreSQL's startup is answered fails at once, naming the fix", async () => {
  const server = notPostgres(true);
  try {
    const r = await svcWithin(
      ["job", "list", "--connect-timeout", "3"],
      { DATABASE_URL: server.url },
      30_000,
    );
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr.trim(),
      /^error: (cannot reach the database|no PostgreSQL answered).*check --database-url \/ DATABASE_URL/,
    );
    assert.equal(r.stderr.trim().split("\n").length, 1);
  } finally {
    await server.close();
  }
});

Deno.test("worker: start() rejects after connectTimeout on an address that is not PostgreSQL, and stops connecting", async () => {
  const server = notPostgres();
  try {
    const worker = createWorker({
      databaseUrl: server.url,
      queues: { default: { maxWorkers: 1 } },
      logger: silentLogger,
      connectTimeout: 700,
    });
    const t0 = performance.now();
    const outcome = await Promise.race([
      worker.start().then(() => "started", (e: Error) => e),
      new Promise((r) => setTimeout(() => r("still pending after 10 s"), 10_000)),
    ]);
    assert.ok(outcome instanceof Error, String(outcome));
    assert.match(
      outcome.message,
      /no PostgreSQL answered at 127\.0\.0\.1:\d+\/postgres within 0\.7 s.*connectTimeout/,
    );
    assert.ok(performance.now() - t0 >= 650);
    const settled = server.connections();
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(server.connections() - settled <= 2, `still connecting: ${server.connections() - settled}`);
  } finally {
    await server.close();
  }
});

Deno.test("worker: start() while PostgreSQL refuses keeps trying until connectTimeout; a server that comes up in time is used", async () => {
  const port = closedPort();
  // Nothing listens: refused until the deadline, then a ConnectTimeoutError (not the first refusal).
  const early = createWorker({
    databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    queues: { default: { maxWorkers: 1 } },
    logger: silentLogger,
    connectTimeout: 1_200,
  });
  const t0 = performance.now();
  const e = await early.start().then(() => null, (err: Error) => err);
  assert.ok(e instanceof ConnectTimeoutError, String(e));
  assert.ok(performance.now() - t0 >= 1_100, `gave up after ${performance.now() - t0} ms`);

  // A proxy that refuses for 1 s and then forwards to the test database: start() succeeds.
  const target = new URL(DATABASE_URL);
  let listener: Deno.TcpListener | undefined;
  const opened = setTimeout(() => {
    listener = Deno.listen({ hostname: "127.0.0.1", port });
    (async () => {
      for await (const conn of listener!) {
        const up = await Deno.connect({ hostname: target.hostname, port: Number(target.port || 5432) });
        conn.readable.pipeTo(up.writable).catch(() => {});
        up.readable.pipeTo(conn.writable).catch(() => {});
      }
    })().catch(() => {});
  }, 1_000);
  const { schema, drop } = await testClient();
  const late = createWorker({
    databaseUrl: `postgres://postgres@127.0.0.1:${port}${target.pathname}`,
    schema,
    queues: { default: { maxWorkers: 1 } },
    logger: silentLogger,
    connectTimeout: 10_000,
  });
  try {
    await late.start();
    assert.ok(late.id);
  } finally {
    clearTimeout(opened);
    await late.shutdown(500).catch(() => {});
    listener?.close();
    await drop();
  }
});

/** A TCP server that accepts and never answers; counts connections. */
function silent(): { url: string; connections: () => number; close(): void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const c of listener) conns.push(c);
  })().catch(() => {});
  return {
    url: `postgres://postgres@127.0.0.1:${(listener.addr as Deno.NetAddr).port}/postgres`,
    connections: () => conns.length,
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed by the client */ }
      }
    },
  };
}

Deno.test("createClient: a call before any connection rejects with ConnectTimeoutError after connectTimeout on every wrong server, and stops connecting", async () => {
  for (const kind of ["answers 400 and closes", "closes before reading", "stays silent"] as const) {
    const server = kind === "stays silent" ? silent() : notPostgres(kind === "closes before reading");
    const client = createClient({ databaseUrl: server.url, connectTimeout: 1, maxConnections: 2 });
    try {
      for (const call of [() => client.enqueue("k", {}), () => client.listQueues()]) {
        const t0 = performance.now();
        const outcome = await Promise.race([
          call().then(() => "settled", (e: Error) => e),
          new Promise((r) => setTimeout(() => r("still pending after 10 s"), 10_000)),
        ]);
        const ms = performance.now() - t0;
        assert.ok(outcome instanceof ConnectTimeoutError, `${kind}: ${String(outcome)}`);
        assert.match(
          outcome.message,
          /no PostgreSQL answered at 127\.0\.0\.1:\d+\/postgres within 1 s.*connectTimeout/,
        );
        assert.ok(ms >= 900 && ms < 5_000, `${kind}: gave up after ${Math.round(ms)} ms`);
      }
      const settled = server.connections();
      await new Promise((r) => setTimeout(r, 500));
      assert.ok(server.connections() - settled <= 2, `${kind}: still connecting`);
    } finally {
      await client.close();
      await server.close();
    }
  }
});

Deno.test("createClient: a refused connection rejects at once with ECONNREFUSED, not after connectTimeout", async () => {
  const client = createClient({
    databaseUrl: `postgres://postgres@127.0.0.1:${closedPort()}/postgres`,
    connectTimeout: 5,
    maxConnections: 1,
  });
  try {
    const t0 = performance.now();
    const e = await client.enqueue("k", {}).then(() => null, (err: Error) => err);
    const ms = performance.now() - t0;
    assert.equal((e as { code?: string } | null)?.code, "ECONNREFUSED", String(e));
    assert.ok(ms < 4_000, `rejected after ${Math.round(ms)} ms`);
  } finally {
    await client.close();
  }
});

Deno.test("createClient: connectTimeout must be a positive number of seconds", () => {
  for (const bad of [0, -1, NaN, Infinity]) {
    assert.throws(
      () => createClient({ databaseUrl: DATABASE_URL, connectTimeout: bad }),
      /connectTimeout must be a positive number of seconds/,
    );
  }
});

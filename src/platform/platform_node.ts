/**
 * The platform module for Node: the npm build (`dnt.ts`) puts this file in the place of `platform.ts`,
 * whose names and types it exports (a test checks both). HTTP is served by `node:http`, with each
 * request converted to a Web `Request` and each `Response` written back; signals, files and the
 * environment come from `node:process`, `node:fs` and `node:os`.
 *
 * One difference: Node has no file locks, so `lockDirectory` writes this process's id into the lock
 * file (created exclusively) and takes over a file whose process is gone, e.g. after a kill -9.
 */
import { setImmediate } from "node:timers";
import { Buffer } from "node:buffer";
import http from "node:http";
import type { AddressInfo } from "node:net";
import fs from "node:fs/promises";
import { unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { FetchHandler, HttpServer, ServeOptions } from "./types.ts";

export type { FetchHandler, HttpServer, ServeOptions } from "./types.ts";

/** Reads an environment variable; an empty value counts as unset. */
export function env(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
}

/** This machine's host name. */
export function hostname(): string {
  try {
    return os.hostname() || "localhost";
  } catch {
    return "localhost";
  }
}

/** This process's id. */
export function pid(): number {
  return process.pid;
}

/** Reads a binary file given as a URL (file: on disk, anything else with fetch). */
export async function readBytes(url: URL): Promise<Uint8Array> {
  if (url.protocol === "file:") return new Uint8Array(await fs.readFile(fileURLToPath(url)));
  const res = await fetch(url);
  if (!res.ok) throw new Error(`cannot read ${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** Reads a file given as a path, or standard input to its end for `-`. */
export async function readInput(path: string): Promise<Uint8Array> {
  if (path !== "-") return new Uint8Array(await fs.readFile(path));
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(typeof c === "string" ? Buffer.from(c) : c);
  return new Uint8Array(Buffer.concat(chunks));
}

/** Calls `fn` on SIGINT and SIGTERM; returns a function that removes the handlers. */
export function onShutdownSignal(fn: (signal: string) => void): () => void {
  const handlers = (["SIGINT", "SIGTERM"] as const).map((s) => {
    const h = () => fn(s);
    process.on(s, h);
    return [s, h] as const;
  });
  return () => handlers.forEach(([s, h]) => process.off(s, h));
}

/**
 * Serves a fetch handler on host:port (port 0 picks a free one) with `node:http`; resolves once it
 * listens, rejects when it cannot. `close` stops listening, answers the requests in flight (later
 * responses close their connection) and resolves when every connection is closed.
 */
export async function serveHttp(opts: ServeOptions, handler: FetchHandler): Promise<HttpServer> {
  let closing = false;
  const server = http.createServer((req, res) => {
    void respond(req, res, handler, closing).finally(() => {
      if (closing) server.closeIdleConnections();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const info = server.address() as AddressInfo;
  const addr = { hostname: info.address, port: info.port };
  opts.onListen?.(addr);
  let closed: Promise<void> | undefined;
  return {
    addr,
    close: () =>
      closed ??= new Promise<void>((resolve) => {
        closing = true;
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

/** Answers one `node:http` request with the fetch handler. */
async function respond(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  handler: FetchHandler,
  closing: boolean,
): Promise<void> {
  const aborted = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) aborted.abort();
  });
  let response: Response;
  try {
    response = await handler(toRequest(req, aborted.signal));
  } catch (e) {
    if (!(e instanceof BadRequest)) console.error(`svc: an HTTP handler failed: ${(e as Error)?.stack ?? e}`);
    response = new Response(e instanceof BadRequest ? "bad request\n" : "internal server error\n", {
      status: e instanceof BadRequest ? 400 : 500,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  try {
    await writeResponse(req, res, response, closing);
  } catch {
    res.destroy(); // the client went away, or the body stream failed
  }
}

class BadRequest extends Error {}

/** The Web `Request` of a `node:http` request. */
function toRequest(req: http.IncomingMessage, signal: AbortSignal): Request {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    try {
      headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    } catch { /* a header the Fetch API refuses: left out */ }
  }
  const local = req.socket.localAddress ?? "127.0.0.1";
  const fallbackHost = `${local.includes(":") ? `[${local}]` : local}:${req.socket.localPort}`;
  let url: URL;
  try {
    url = new URL(req.url ?? "/", `http://${req.headers.host || fallbackHost}`);
  } catch {
    throw new BadRequest(`invalid request target ${req.url}`);
  }
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method,
    headers,
    signal,
    body: hasBody ? (Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>) : undefined,
    // Node's fetch wants this for a streamed body (not in the DOM types).
    ...(hasBody ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** Writes a Web `Response` to a `node:http` response, its body streamed with back-pressure. */
async function writeResponse(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  response: Response,
  closing: boolean,
): Promise<void> {
  const cookies = response.headers.getSetCookie();
  for (const [name, value] of response.headers) {
    if (name !== "set-cookie") res.setHeader(name, value);
  }
  if (cookies.length) res.setHeader("set-cookie", cookies);
  if (closing) res.setHeader("connection", "close");
  res.writeHead(response.status, response.statusText || undefined);
  if (req.method === "HEAD" || response.body === null) {
    await response.body?.cancel();
    res.end();
    return;
  }
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve, reject) => {
          const onDrain = () => {
            res.off("close", onClose);
            resolve();
          };
          const onClose = () => {
            res.off("drain", onDrain);
            reject(new Error("the connection closed"));
          };
          res.once("drain", onDrain);
          res.once("close", onClose);
        });
      }
    }
  } catch (e) {
    await reader.cancel().catch(() => {});
    throw e;
  }
  await new Promise<void>((resolve) => res.end(resolve));
}

/** Writes one line to standard error. */
export function eprintln(line: string): void {
  console.error(line);
}

/** Exits the process. */
export function exit(code: number): never {
  process.exit(code);
}

/** Command-line arguments after the script. */
export function args(): string[] {
  return process.argv.slice(2);
}

/**
 * Whether this process is a single executable application (`node:sea`, `deno task sea`), which can
 * load no npm package from disk.
 */
export function singleBinary(): boolean {
  try {
    const sea = (process as any).getBuiltinModule?.("node:sea");
    return sea?.isSea?.() === true;
  } catch {
    return false;
  }
}

/** Lock files this process holds (so that a second lock of the same file fails, as with a file lock). */
const held = new Set<string>();
let exitHook = false;

/**
 * Creates `dir` when missing and takes the lock `dir/name`: the file, created exclusively, holds this
 * process's id (removed when the process exits, or by the returned function); null when a running
 * process holds it. A file whose process is gone (a kill -9) is taken over.
 */
export async function lockDirectory(dir: string, name: string): Promise<(() => Promise<void>) | null> {
  await fs.mkdir(dir, { recursive: true });
  const file = path.resolve(dir, name);
  if (held.has(file)) return null;
  const mine = `${process.pid}\n`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await fs.writeFile(file, mine, { flag: "wx" });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const owner = Number((await fs.readFile(file, "utf8").catch(() => "")).trim());
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processAlive(owner)) return null;
      await fs.rm(file, { force: true }); // left by a process that is gone: taken over
      continue;
    }
    // Two processes taking over the same stale file: the one whose id is in it holds the lock.
    if ((await fs.readFile(file, "utf8").catch(() => "")) !== mine) return null;
    held.add(file);
    if (!exitHook) {
      exitHook = true;
      process.once("exit", () => {
        for (const f of held) {
          try {
            unlinkSync(f);
          } catch { /* gone */ }
        }
      });
    }
    return async () => {
      if (!held.delete(file)) return;
      if ((await fs.readFile(file, "utf8").catch(() => "")) === mine) await fs.rm(file, { force: true });
    };
  }
  return null;
}

function processAlive(id: number): boolean {
  try {
    process.kill(id, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether a file or directory exists. */
export async function pathExists(p: string): Promise<boolean> {
  try {
    await fs.stat(p);
    return true;
  } catch {
    return false;
  }
}

/** Removes a directory and everything in it (nothing when it does not exist). */
export async function removeDir(p: string): Promise<void> {
  await fs.rm(p, { recursive: true, force: true });
}

/**
 * Resolves after the current macrotask, so that everything already settled has run. `setImmediate`,
 * not `setTimeout(0)`: timers are clamped to a millisecond or more, which costs a claim loop dearly.
 */
export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

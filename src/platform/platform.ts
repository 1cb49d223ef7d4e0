/**
 * The one module that touches the host runtime, here Deno. The npm build for Node (`dnt.ts`) puts
 * `platform_node.ts`, which exports the same names with the same types, in its place. Everything else
 * in `src/` uses Web-standard APIs, `node:` modules that both runtimes have, and npm packages only.
 */

import { setImmediate } from "node:timers";
import type { FetchHandler, HttpServer, ServeOptions } from "./types.ts";

export type { FetchHandler, HttpServer, ServeOptions } from "./types.ts";

const D: any = (globalThis as any).Deno;

/** Reads an environment variable; an empty value counts as unset. */
export function env(name: string): string | undefined {
  const v = D?.env?.get(name) ?? (globalThis as any).process?.env?.[name];
  return v === undefined || v === "" ? undefined : v;
}

/** This machine's host name. */
export function hostname(): string {
  try {
    return D?.hostname?.() ?? "localhost";
  } catch {
    return "localhost";
  }
}

/** This process's id. */
export function pid(): number {
  return D?.pid ?? (globalThis as any).process?.pid ?? 0;
}

/** Reads a binary file given as a URL. */
export async function readBytes(url: URL): Promise<Uint8Array> {
  if (url.protocol === "file:" && D?.readFile) return await D.readFile(url);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`cannot read ${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** Reads a file given as a path, or standard input to its end for `-`. */
export async function readInput(path: string): Promise<Uint8Array> {
  if (path === "-") return await new Response(D.stdin.readable).bytes();
  return await D.readFile(path);
}

/** Calls `fn` on SIGINT and SIGTERM; returns a function that removes the handlers. */
export function onShutdownSignal(fn: (signal: string) => void): () => void {
  const sigs = ["SIGINT", "SIGTERM"];
  const handlers = sigs.map((s) => {
    const h = () => fn(s);
    D.addSignalListener(s, h);
    return [s, h] as const;
  });
  return () => handlers.forEach(([s, h]) => D.removeSignalListener(s, h));
}

/**
 * Serves a fetch handler on host:port (port 0 picks a free one); resolves once it listens, rejects
 * when it cannot (the address in use, say).
 */
export function serveHttp(opts: ServeOptions, handler: FetchHandler): Promise<HttpServer> {
  try {
    const server = D.serve({ hostname: opts.hostname, port: opts.port, onListen: () => {} }, handler);
    const addr = server.addr as { hostname: string; port: number };
    opts.onListen?.(addr);
    return Promise.resolve({
      addr: { hostname: addr.hostname, port: addr.port },
      close: async () => {
        await server.shutdown();
      },
    });
  } catch (e) {
    return Promise.reject(e);
  }
}

/** Writes one line to standard error. */
export function eprintln(line: string): void {
  console.error(line);
}

/** Exits the process. */
export function exit(code: number): never {
  D.exit(code);
  throw new Error("unreachable");
}

/** Command-line arguments after the script. */
export function args(): string[] {
  return [...(D?.args ?? [])];
}

/** Whether this process is a single executable (`deno compile`'s), which holds no npm package it did not embed. */
export function singleBinary(): boolean {
  return D?.build?.standalone === true;
}

/**
 * Creates `dir` when missing and takes an exclusive lock on the file `dir/name` (released when the
 * process ends, or by the returned function); null when another process holds it.
 */
export async function lockDirectory(dir: string, name: string): Promise<(() => Promise<void>) | null> {
  await D.mkdir(dir, { recursive: true });
  const file = await D.open(`${dir}/${name}`, { write: true, create: true });
  if (!(await file.tryLock(true))) {
    file.close();
    return null;
  }
  return async () => {
    try {
      await file.unlock();
    } finally {
      file.close();
    }
  };
}

/** Whether a file or directory exists. */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await D.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Removes a directory and everything in it (nothing when it does not exist). */
export async function removeDir(path: string): Promise<void> {
  await D.remove(path, { recursive: true }).catch((e: Error) => {
    if (e?.name !== "NotFound") throw e;
  });
}

/**
 * Resolves after the current macrotask, so that everything already settled has run. `setImmediate`,
 * not `setTimeout(0)`: timers are clamped to a millisecond or more, which costs a claim loop dearly.
 */
export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

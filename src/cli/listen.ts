/** Serving an HTTP handler from a CLI command until SIGINT/SIGTERM (`callbacks serve`, `serve`). */
import { type HttpServer, onShutdownSignal, serveHttp } from "../platform/platform.ts";
import { CliError } from "./common.ts";

/**
 * Listens on host:port (0 picks a free port) with `handler`, calls `announce` with the bound address
 * (IPv6 hosts in brackets, ready for a URL), waits for SIGINT or SIGTERM, then closes the server.
 * A failure to listen is one line naming the fix.
 */
export async function serveUntilSignal(
  host: string,
  port: number,
  handler: (req: Request) => Response | Promise<Response>,
  announce: (addr: { hostname: string; port: number; urlHost: string }) => void,
): Promise<void> {
  let server: HttpServer;
  try {
    server = await serveHttp({ hostname: host, port }, handler);
  } catch (e) {
    throw new CliError(
      `cannot listen on ${host}:${port} (${(e as Error).message}); choose another --host / --port`,
    );
  }
  const { hostname, port: bound } = server.addr;
  announce({ hostname, port: bound, urlHost: hostname.includes(":") ? `[${hostname}]` : hostname });
  // The handler stays until the server is closed: `deno task` forwards Ctrl-C, so the process often gets
  // SIGINT twice at once, and a second one must not kill it half-way through the clean stop.
  let off = () => {};
  await new Promise<void>((resolve) => {
    off = onShutdownSignal(() => resolve());
  });
  try {
    await server.close();
  } finally {
    off();
  }
}

/**
 * Types shared by the two implementations of the platform module: `platform.ts` (Deno) and
 * `platform_node.ts` (Node, which the npm build puts in its place).
 */

/** A running HTTP server. */
export interface HttpServer {
  /** The address it listens on, as host:port. */
  addr: { hostname: string; port: number };
  /** Stops listening and resolves once the requests in flight are answered. */
  close(): Promise<void>;
}

/** Where {@link HttpServer} listens (port 0 picks a free one). */
export interface ServeOptions {
  hostname: string;
  port: number;
  onListen?: (addr: { hostname: string; port: number }) => void;
}

/** A fetch handler: a Web `Request` in, a Web `Response` out. */
export type FetchHandler = (req: Request) => Response | Promise<Response>;

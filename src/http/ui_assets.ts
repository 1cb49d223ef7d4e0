/**
 * The admin UI's built files (`ui/dist/`), from the generated module that holds them
 * (`src/generated/ui.ts`), so `svc serve` answers alike from a checkout, a published package and a
 * compiled binary, from any working directory; a folder given as a URL is read from disk instead.
 * Files are kept in memory (the bundle is small); any GET that is not a file gets `index.html`
 * (client-side routes).
 */
import { readBytes } from "../platform/platform.ts";
import { UI_FILES } from "../generated/ui.ts";

const CONTENT_TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  json: "application/json; charset=utf-8",
  map: "application/json; charset=utf-8",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon",
  txt: "text/plain; charset=utf-8",
  woff2: "font/woff2",
};

/**
 * Content Security Policy of the UI: everything from this origin, nothing from a CDN, no inline
 * scripts; inline styles are allowed (style attributes set by the components).
 */
export const UI_CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** A safe relative file path: segments of `A-Z a-z 0-9 _ . -`, no `..`, no hidden files. */
const SAFE_PATH = /^(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*\/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

interface Asset {
  body: Uint8Array;
  type: string;
  etag: string;
}

/** A file of the generated module, as bytes (null when there is none). */
function embeddedFile(relPath: string): Uint8Array | null {
  const f = Object.hasOwn(UI_FILES, relPath) ? UI_FILES[relPath] : undefined;
  if (!f) return null;
  if ("text" in f) return new TextEncoder().encode(f.text);
  return Uint8Array.from(atob(f.base64), (c) => c.charCodeAt(0));
}

/** Serves the built UI: the generated module's files, or those of the folder `distUrl` when given. */
export class UiAssets {
  #cache = new Map<string, Promise<Asset | null>>();

  constructor(readonly distUrl?: URL) {}

  /** The file at `relPath` (no leading slash), or null when there is none. */
  file(relPath: string): Promise<Asset | null> {
    if (!SAFE_PATH.test(relPath) || relPath.split("/").some((s) => s === "..")) return Promise.resolve(null);
    const cached = this.#cache.get(relPath);
    if (cached) return cached;
    const p = this.#load(relPath);
    // Only files are kept: misses (client-side routes) are not, so arbitrary paths cannot grow the cache.
    this.#cache.set(relPath, p);
    p.then((a) => a === null && this.#cache.delete(relPath));
    return p;
  }

  async #load(relPath: string): Promise<Asset | null> {
    let body: Uint8Array | null;
    try {
      body = this.distUrl ? await readBytes(new URL(relPath, this.distUrl)) : embeddedFile(relPath);
    } catch {
      return null; // missing, or a directory
    }
    if (!body) return null;
    const ext = relPath.slice(relPath.lastIndexOf(".") + 1).toLowerCase();
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body as BufferSource));
    const etag = `"${[...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("")}"`;
    return { body, type: CONTENT_TYPES[ext] ?? "application/octet-stream", etag };
  }

  /** Answers a GET or HEAD outside `/api`: the file, else `index.html`, else a 404 saying the UI is not built. */
  async respond(req: Request, pathname: string): Promise<Response> {
    const rel = decodeSafe(pathname.replace(/^\/+/, ""));
    let asset = rel && rel !== "index.html" ? await this.file(rel) : null;
    const isIndex = asset === null;
    if (isIndex) asset = await this.file("index.html");
    if (!asset) {
      return new Response(
        `The admin UI is not built (no index.html in ${
          this.distUrl?.href ?? "src/generated/ui.ts"
        }); the REST API is under /api.\n`,
        { status: 404, headers: { "content-type": "text/plain; charset=utf-8" } },
      );
    }
    const headers = new Headers({
      "content-type": asset.type,
      etag: asset.etag,
      // index.html is revalidated on every load; the bundle names carry a content hash in the
      // query (`app.js?v=...`), but the files keep their names, so they are revalidated too.
      "cache-control": "no-cache",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
    });
    if (isIndex) {
      headers.set("content-security-policy", UI_CSP);
      headers.set("x-frame-options", "DENY");
    }
    if (req.headers.get("if-none-match") === asset.etag) return new Response(null, { status: 304, headers });
    return new Response(req.method === "HEAD" ? null : asset.body as BodyInit, { status: 200, headers });
  }
}

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return "";
  }
}

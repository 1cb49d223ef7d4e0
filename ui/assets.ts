/**
 * The built UI as `svc serve` needs it: the files of ui/dist found through `import.meta.url`
 * (so it works from any working directory, and from a published package where the module is
 * not on the local disk: `fetch` reads file: and https: URLs alike), and the static fallback
 * rule of the router.
 */

export interface UiAsset {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
}

/** Every file of ui/dist and its content type. */
export const UI_FILES: Readonly<Record<string, string>> = {
  "/index.html": "text/html; charset=utf-8",
  "/app.js": "text/javascript; charset=utf-8",
  "/app.css": "text/css; charset=utf-8",
};

/** Where the built files live. */
export const UI_DIST_URL: URL = new URL("./dist/", import.meta.url);

/** Reads the built UI; throws, naming the fix, when a file is missing. */
export async function loadUiAssets(base: URL = UI_DIST_URL): Promise<Map<string, UiAsset>> {
  const assets = new Map<string, UiAsset>();
  for (const [path, contentType] of Object.entries(UI_FILES)) {
    const url = new URL("." + path, base);
    let body: Uint8Array<ArrayBuffer>;
    try {
      const res = await fetch(url);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      body = new Uint8Array(await res.arrayBuffer());
    } catch (err) {
      throw new Error(
        `UI asset ${url.href} cannot be read (${(err as Error).message}): run \`deno run -A ui/build.ts\``,
      );
    }
    assets.set(path, { body, contentType });
  }
  return assets;
}

/**
 * Which UI file answers a GET of `pathname`: the file itself for /app.js and /app.css,
 * index.html for `/` and every client-side route, null for anything under /api (the API
 * answers those, with its own 404) and for paths that look like a missing file (`/x.png`).
 */
export function uiFileFor(pathname: string): string | null {
  if (pathname === "/api" || pathname.startsWith("/api/")) return null;
  if (pathname in UI_FILES) return pathname;
  const last = pathname.slice(pathname.lastIndexOf("/") + 1);
  if (/\.[a-z0-9]+$/i.test(last)) return null;
  return "/index.html";
}

/**
 * Launches Debian's chromium headless through playwright-core, for the browser tests and the
 * screenshot script (the first `chromium` on PATH).
 */
import { type Browser, chromium } from "playwright-core";

/** The chromium executable on PATH, or null when there is none. */
export function findChromium(): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (!dir) continue;
    try {
      if (Deno.statSync(`${dir}/chromium`).isFile) return `${dir}/chromium`;
    } catch { /* not in this directory */ }
  }
  return null;
}

/** The chromium executable on PATH; throws naming the install command when there is none. */
export function chromiumPath(): string {
  const p = findChromium();
  if (!p) throw new Error("chromium not found: apt-get update && apt-get install -y chromium");
  return p;
}

/** A headless chromium without a sandbox, background networking or first-run screens. */
export async function launchChromium(): Promise<Browser> {
  return await chromium.launch({
    executablePath: chromiumPath(),
    args: [
      "--no-sandbox",
      "--headless",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

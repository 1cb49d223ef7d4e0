/**
 * Launches Debian's chromium headless through playwright-core, for the browser tests and the
 * screenshot script (the path is what `command -v chromium` prints).
 */
import { type Browser, chromium } from "playwright-core";

/** The chromium executable on PATH; throws naming the install command when there is none. */
export function chromiumPath(): string {
  const r = new Deno.Command("sh", { args: ["-c", "command -v chromium"], stdout: "piped" }).outputSync();
  const p = new TextDecoder().decode(r.stdout).trim();
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

/// <reference lib="dom" />
/**
 * Takes full-page screenshots of every page at 1400 px and 400 px with Debian's chromium, for a
 * person to look at (not a test: the browser tests of `svc serve` assert things).
 *
 *   deno run -A cli.ts dev --port 8788 &               # or a real `svc serve`
 *   deno run -A --config deno.contrib.json ui/dev/screenshots.ts [--url http://127.0.0.1:8788] [--out /tmp/ui-shots] [--prefix rw]
 *
 * Screenshots are written outside the repository by default; keep them out of git.
 */
import { launchChromium } from "./chromium.ts";

const argv = Deno.args;
const opt = (name: string, fallback: string) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] ? argv[i + 1] : fallback;
};
const BASE = opt("--url", "http://127.0.0.1:8788").replace(/\/$/, "");
const OUT = opt("--out", "/tmp/ui-shots");
const PREFIX = opt("--prefix", "rw");

async function firstJobId(state: string): Promise<number | null> {
  const res = await fetch(`${BASE}/api/jobs?state=${state}&limit=1`);
  const body = await res.json();
  return body.jobs?.[0]?.id ?? null;
}

await Deno.mkdir(OUT, { recursive: true });
const browser = await launchChromium();
const failed = await firstJobId("failed");
const waiting = await firstJobId("waiting_external");
const completed = await firstJobId("completed");
const pages: [string, string][] = [
  ["dashboard", "/"],
  ["running", "/running"],
  ["jobs", "/jobs"],
  ["jobs-failed", "/jobs?state=failed"],
  ["queues", "/queues"],
  ["kinds", "/kinds"],
  ["cron", "/cron"],
  ["runtimes", "/runtimes"],
];
if (failed) pages.push(["job-failed", `/jobs/${failed}`]);
if (waiting) pages.push(["job-waiting", `/jobs/${waiting}`]);
if (completed) pages.push(["job-completed", `/jobs/${completed}`]);

try {
  for (const width of [1400, 400]) {
    const context = await browser.newContext({ viewport: { width, height: width > 800 ? 900 : 812 } });
    const page = await context.newPage();
    page.on("pageerror", (e) => console.error(`page error on ${page.url()}: ${e.message}`));
    page.on(
      "console",
      (m) => m.type() === "error" && console.error(`console error on ${page.url()}: ${m.text()}`),
    );
    for (const [name, path] of pages) {
      await page.goto(BASE + path);
      await page.waitForSelector("[data-testid^='page-']");
      await page.waitForTimeout(600);
      const file = `${OUT}/${PREFIX}-${name}-${width}.png`;
      await page.screenshot({ path: file, fullPage: true });
      const overflow = await page.evaluate(() =>
        document.documentElement.scrollWidth - document.documentElement.clientWidth
      );
      console.log(`${file}${overflow > 0 ? `  (page wider than the viewport by ${overflow}px)` : ""}`);
    }
    await context.close();
  }
} finally {
  await browser.close();
}

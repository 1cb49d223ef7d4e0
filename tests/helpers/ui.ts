/**
 * Shared by the browser tests of the admin UI: a seeded schema, `svc serve`'s router over 127.0.0.1, and
 * Debian's chromium driven by playwright-core; everything is closed and dropped whatever fails.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { findChromium, launchChromium } from "../../ui/dev/chromium.ts";
import type { Client } from "../../src/client/client.ts";
import { createAdminServer } from "../../src/http/server.ts";
import { type HttpServer, serveHttp } from "../../src/platform/platform.ts";
import { setState } from "./admin.ts";
import { testClient } from "./db.ts";

const SHOTS = new URL("../screenshots/", import.meta.url);

/**
 * Without chromium the browser tests are skipped with one line, except in CI (env CI set and not 0 or
 * false, as `.ci/run` sets it), where a missing browser must fail the run.
 */
export const IN_CI = !["", "0", "false"].includes((Deno.env.get("CI") ?? "").toLowerCase());
export const SKIP = findChromium() === null && !IN_CI;
if (SKIP) {
  console.log(
    "browser tests skipped: chromium not found (apt-get install chromium); with CI=1 this is a failure",
  );
}

/** Waits until `selector` matches exactly `n` elements (polling from here: the page's CSP forbids eval). */
export async function waitCount(page: Page, selector: string, n: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + Math.max(timeoutMs, 60_000);
  let count = -1;
  while ((count = await page.locator(selector).count()) !== n) {
    if (Date.now() > until) throw new Error(`${selector}: ${count} elements, expected ${n}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function shot(page: Page, name: string): Promise<void> {
  await Deno.mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
}

/** Clicks the job page's retry button (and its confirmation) and waits for the job to be available. */
export async function retryOnJobPage(page: Page, client: Client, id: number): Promise<void> {
  await page.getByTestId("retry-button").click();
  const confirm = page.getByRole("button", { name: /^(confirm|retry now|yes)/i });
  if (await confirm.count()) await confirm.first().click();
  for (let i = 0; i < 100 && (await client.getJob(id))!.state === "failed"; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal((await client.getJob(id))!.state, "available");
}

/** Jobs in several states, two queues, a cron schedule, a leader and an unhealthy runtime. */
export async function seed(client: Client): Promise<{ failedId: number }> {
  const jobs = await client.enqueueMany([
    { kind: "send_email", queue: "mail", args: { to: "alice@example.com" } },
    { kind: "send_email", queue: "mail", args: { to: "bob@example.com" } },
    { kind: "resize_image", queue: "media", args: { path: "/img/cat.png", width: 640 } },
    { kind: "resize_image", queue: "media", args: { path: "/img/dog.png", width: 320 } },
    {
      kind: "send_email",
      queue: "mail",
      args: { to: "carol@example.com" },
      runAt: new Date(Date.now() + 3_600_000),
    },
  ]);
  await setState(client, [jobs[1].id], "failed", [
    { attempt: 1, at: new Date().toISOString(), error: "SMTP 421: try again later", terminal: false },
    { attempt: 2, at: new Date().toISOString(), error: "SMTP 550: mailbox unavailable", terminal: true },
  ]);
  await setState(client, [jobs[2].id], "completed");
  await client.addCron("nightly_report", {
    schedule: "0 3 * * *",
    kind: "report",
    queue: "default",
    timezone: "UTC",
  });
  const rt = { hostname: "worker-a", queues: ["mail", "media"], health: {} };
  await client.engine.upsertRuntime({ ...rt, id: "worker-a:101:x1", pid: 101, ready: true, leader: true });
  await client.sql.unsafe(
    `update ${client.names.q}.leadership set holder = 'worker-a:101:x1', term = term + 1, renewed_at = now()`,
  );
  await client.engine.upsertRuntime({
    ...rt,
    id: "worker-b:202:y2",
    hostname: "worker-b",
    pid: 202,
    ready: false,
    leader: false,
  });
  return { failedId: jobs[1].id };
}

export async function withUi(
  readOnly: boolean,
  fn: (page: Page, client: Client, base: string, seeded: { failedId: number }) => Promise<void>,
  o: {
    schema?: string;
    launch?: () => Promise<Browser>;
    authToken?: string;
    /** Console lines that are expected (the browser's own log of a 401 answer). */
    expectedConsole?: RegExp;
    /** The page's size (default 1280 × 900). */
    viewport?: { width: number; height: number };
    /** The browser's time zone (default: the machine's). */
    timezoneId?: string;
  } = {},
) {
  const { client, drop } = await testClient({ maxConnections: 3, schema: o.schema });
  let server: HttpServer | undefined;
  let browser: Browser | undefined;
  const errors: string[] = [];
  // Whatever fails (seeding, the browser's start, the test, a close), the schema is dropped.
  try {
    const seeded = await seed(client);
    const app = createAdminServer(client, {
      callbackAuth: { kind: "unsigned" },
      readOnly,
      authToken: o.authToken,
      logger: { info: () => {}, error: (l: string) => console.error(l) },
    });
    server = await serveHttp({ hostname: "127.0.0.1", port: 0 }, app.fetch);
    const base = `http://127.0.0.1:${server.addr.port}`;
    browser = await (o.launch ?? launchChromium)();
    const page = await browser.newPage({
      viewport: o.viewport ?? { width: 1280, height: 900 },
      timezoneId: o.timezoneId,
    });
    // Playwright's own default (30 s per wait) is too short on a slow or loaded machine; a failing wait
    // still fails, later.
    page.setDefaultTimeout(120_000);
    page.setDefaultNavigationTimeout(120_000);
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error" && !o.expectedConsole?.test(m.text())) errors.push(m.text());
    });
    await fn(page, client, base, seeded);
    assert.deepEqual(errors, [], "no errors in the browser console");
  } finally {
    try {
      await browser?.close();
      await server?.close();
    } finally {
      await drop();
    }
  }
}

/**
 * Nothing of the page reaches past the viewport's right edge, the menu's entries included, and no element
 * is wider than the viewport or scrolls sideways inside it (a table clipped in a scrolling box counts).
 */
export async function assertFits(page: Page, what: string): Promise<void> {
  // Run in the page (a string: the tests' type check has no DOM library).
  const r = await page.evaluate(`(() => {
    const vw = document.documentElement.clientWidth;
    const nav = [...document.querySelectorAll(".nav a")].map((a) => {
      const b = a.getBoundingClientRect();
      return { text: a.textContent, left: b.left, right: b.right };
    });
    const name = (e) => e.tagName.toLowerCase() + (e.dataset.testid ? "[" + e.dataset.testid + "]" : "") +
      (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "");
    // Visually hidden boxes (the screen-reader texts, a stacked table's header) are clipped to 1 px.
    const clipped = [...document.body.querySelectorAll("*")].filter((e) => getComputedStyle(e).clip !== "auto");
    const wide = [];
    for (const e of document.body.querySelectorAll("*")) {
      const b = e.getBoundingClientRect();
      if (b.width === 0 || b.height === 0 || clipped.some((c) => c.contains(e))) continue;
      if (b.width > vw + 0.5 || b.right > vw + 0.5) wide.push(name(e) + " " + Math.round(b.left) + ".." + Math.round(b.right));
      else if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible" &&
        getComputedStyle(e).overflowX !== "hidden" && getComputedStyle(e).overflowX !== "clip") {
        wide.push(name(e) + " scrolls sideways: " + e.scrollWidth + " > " + e.clientWidth);
      }
    }
    return { vw, scroll: document.documentElement.scrollWidth, nav, wide: wide.slice(0, 10) };
  })()`) as {
    vw: number;
    scroll: number;
    nav: { text: string; left: number; right: number }[];
    wide: string[];
  };
  assert.ok(r.scroll <= r.vw, `${what}: the page is ${r.scroll} px wide in a ${r.vw} px viewport`);
  assert.deepEqual(r.wide, [], `${what}: elements wider than the ${r.vw} px viewport`);
  for (const n of r.nav) {
    assert.ok(
      n.left >= 0 && n.right <= r.vw,
      `${what}: menu entry ${n.text} at ${n.left}..${n.right} of ${r.vw}`,
    );
  }
}

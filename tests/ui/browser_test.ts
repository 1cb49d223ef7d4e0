/**
 * The admin UI in a real browser (playwright-core driving Debian's chromium) against `svc serve`'s
 * router over 127.0.0.1: open the dashboard, filter jobs, open a job, retry a failed job, pause and
 * resume a queue; in read-only mode no mutation control is shown. Each page is saved as a screenshot
 * in tests/screenshots/ (git-ignored) for a person to look at.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { findChromium, launchChromium } from "../../ui/dev/chromium.ts";
import type { Client } from "../../src/client/client.ts";
import { createAdminServer } from "../../src/http/server.ts";
import { type HttpServer, serveHttp } from "../../src/runtime/runtime.ts";
import { setState } from "../helpers/admin.ts";
import { pendingCallback } from "../helpers/http.ts";
import { DATABASE_URL, freshSchema, TEST_ENGINE, testClient } from "../helpers/db.ts";
import postgres from "postgres";

const SHOTS = new URL("../screenshots/", import.meta.url);

/**
 * Without chromium the browser tests are skipped with one line, except in CI (env CI set and not 0 or
 * false, as `.ci/run` sets it), where a missing browser must fail the run.
 */
const IN_CI = !["", "0", "false"].includes((Deno.env.get("CI") ?? "").toLowerCase());
const SKIP = findChromium() === null && !IN_CI;
if (SKIP) {
  console.log(
    "browser tests skipped: chromium not found (apt-get install chromium); with CI=1 this is a failure",
  );
}

/** Waits until `selector` matches exactly `n` elements (polling from here: the page's CSP forbids eval). */
async function waitCount(page: Page, selector: string, n: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let count = -1;
  while ((count = await page.locator(selector).count()) !== n) {
    if (Date.now() > until) throw new Error(`${selector}: ${count} elements, expected ${n}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function shot(page: Page, name: string): Promise<void> {
  await Deno.mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
}

/** Clicks the job page's retry button (and its confirmation) and waits for the job to be available. */
async function retryOnJobPage(page: Page, client: Client, id: number): Promise<void> {
  await page.getByTestId("retry-button").click();
  const confirm = page.getByRole("button", { name: /^(confirm|retry now|yes)/i });
  if (await confirm.count()) await confirm.first().click();
  for (let i = 0; i < 100 && (await client.getJob(id))!.state === "failed"; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal((await client.getJob(id))!.state, "available");
}

/** Jobs in several states, two queues, a cron schedule, a leader and an unhealthy runtime. */
async function seed(client: Client): Promise<{ failedId: number }> {
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

async function withUi(
  readOnly: boolean,
  fn: (page: Page, client: Client, base: string, seeded: { failedId: number }) => Promise<void>,
  o: {
    schema?: string;
    launch?: () => Promise<Browser>;
    authToken?: string;
    /** Console lines that are expected (the browser's own log of a 401 answer). */
    expectedConsole?: RegExp;
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
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
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

Deno.test({
  ignore: SKIP,
  name: "UI: dashboard, filter jobs, open a job, retry it, pause and resume a queue and a cron schedule",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base, { failedId }) => {
      await page.goto(base + "/");
      await page.getByTestId("page-dashboard").waitFor();
      await page.getByTestId("state-count-failed").filter({ hasText: "1" }).waitFor();
      await page.getByTestId("throughput-chart").waitFor();
      await page.getByTestId("storage-engine").filter({ hasText: TEST_ENGINE }).waitFor();
      await shot(page, "rw-dashboard");

      // Filter the jobs list to the failed ones.
      await page.goto(base + "/jobs");
      await page.getByTestId("page-jobs").waitFor();
      await page.locator("[data-testid^=job-row-]").first().waitFor();
      assert.equal(await page.locator("[data-testid^=job-row-]").count(), 5);
      await page.getByTestId("filter-state").selectOption("failed");
      await page.waitForURL(/state=failed/);
      await page.locator(`[data-testid=job-row-${failedId}]`).waitFor();
      await waitCount(page, "[data-testid^=job-row-]", 1);
      assert.equal(
        await page.locator(`[data-testid=job-row-${failedId}]`).getAttribute("data-state"),
        "failed",
      );
      await shot(page, "rw-jobs-failed");

      // Text search in args.
      await page.goto(base + "/jobs");
      await page.getByTestId("search-input").fill("dog.png");
      await page.getByTestId("filters-apply").click();
      await page.waitForURL(/q=dog/);
      await waitCount(page, "[data-testid^=job-row-]", 1);

      // Open the failed job: its errors are shown; retry it.
      await page.goto(base + "/jobs?state=failed");
      await page.getByTestId(`job-link-${failedId}`).click();
      await page.getByTestId("page-job").waitFor();
      await page.getByTestId("job-errors").filter({ hasText: "SMTP 550: mailbox unavailable" }).waitFor();
      await page.getByTestId("job-errors").filter({ hasText: "SMTP 421" }).waitFor();
      await shot(page, "rw-job-failed");
      await retryOnJobPage(page, client, failedId);
      await page.getByTestId("retry-button").waitFor({ state: "detached" });
      await shot(page, "rw-job-retried");

      // A job waiting for a callback whose requests were refused shows the count and the last refusal.
      const { job: waiting, callbackId } = await pendingCallback(client, { queue: "media" });
      for (
        const [status, code] of [[401, "invalid_signature"], [401, "invalid_signature"], [
          400,
          "invalid_body",
        ]]
      ) {
        await client.sql.unsafe(`select ${client.names.q}.record_callback_rejection($1::uuid, $2, $3)`, [
          callbackId,
          status,
          code,
        ]);
      }
      await page.goto(`${base}/jobs/${waiting.id}`);
      await page.getByTestId("job-callback-refused").filter({ hasText: "3 callback requests were refused" })
        .filter({ hasText: "invalid_body" }).waitFor();
      assert.equal((await page.getByTestId(`callback-refused-${callbackId}`).textContent())?.trim(), "3");
      await shot(page, "rw-job-callback-refused");

      // Pause and resume a queue.
      await page.goto(base + "/queues");
      await page.getByTestId("page-queues").waitFor();
      await page.getByTestId("pause-queue-mail").click();
      await page.getByTestId("resume-queue-mail").waitFor();
      assert.equal((await client.listQueues()).find((q) => q.name === "mail")!.paused, true);
      await shot(page, "rw-queues-paused");
      await page.getByTestId("resume-queue-mail").click();
      await page.getByTestId("pause-queue-mail").waitFor();
      assert.equal((await client.listQueues()).find((q) => q.name === "mail")!.paused, false);

      await page.goto(base + "/cron");
      await page.getByTestId("cron-row-nightly_report").waitFor();
      await shot(page, "rw-cron");
      await page.getByTestId("pause-cron-nightly_report").click();
      await page.getByTestId("resume-cron-nightly_report").waitFor();
      assert.equal((await client.getCron("nightly_report"))!.paused, true);
      await page.getByTestId("resume-cron-nightly_report").click();
      await page.getByTestId("pause-cron-nightly_report").waitFor();
      assert.equal((await client.getCron("nightly_report"))!.paused, false);
      await page.goto(base + "/runtimes");
      await page.getByTestId("runtime-leader-worker-a:101:x1").waitFor();
      await page.getByTestId("runtime-unhealthy-worker-b:202:y2").waitFor();
      await shot(page, "rw-runtimes");

      // Phone width.
      await page.setViewportSize({ width: 375, height: 800 });
      await page.goto(base + "/jobs");
      await page.locator("[data-testid^=job-row-]").first().waitFor();
      await shot(page, "rw-jobs-phone");
      await page.goto(base + "/");
      await page.getByTestId("page-dashboard").waitFor();
      await shot(page, "rw-dashboard-phone");
    }),
});

Deno.test({
  ignore: SKIP,
  name: "UI in read-only mode shows no mutation control on any page",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(true, async (page, _client, base, { failedId }) => {
      const controls = [
        "retry-button",
        "cancel-button",
        "bulk-retry-button",
        "bulk-bar",
        "pause-queue-mail",
        "resume-queue-mail",
        "pause-queue-media",
        "trigger-cron-nightly_report",
        "pause-cron-nightly_report",
        "resume-cron-nightly_report",
      ];
      const pages: [string, string, string][] = [
        ["/", "page-dashboard", "ro-dashboard"],
        ["/jobs?state=failed", "page-jobs", "ro-jobs-failed"],
        [`/jobs/${failedId}`, "page-job", "ro-job-failed"],
        ["/queues", "page-queues", "ro-queues"],
        ["/cron", "page-cron", "ro-cron"],
        ["/runtimes", "page-runtimes", "ro-runtimes"],
      ];
      for (const [path, testid, name] of pages) {
        await page.goto(base + path);
        await page.getByTestId(testid).waitFor();
        await page.getByTestId("read-only-badge").waitFor();
        await page.waitForLoadState("networkidle");
        for (const c of controls) assert.equal(await page.getByTestId(c).count(), 0, `${c} on ${path}`);
        // No enabled button whose label is a mutation.
        const labels = await page.locator("button:not([disabled])").allInnerTexts();
        for (const l of labels) {
          assert.doesNotMatch(l, /^(retry|cancel|pause|resume|trigger|enqueue)/i, `${path}: ${l}`);
        }
        await shot(page, name);
      }
    }),
});

Deno.test({
  ignore: SKIP,
  name: "UI with a token: the login form, a wrong token refused, the pages after login, log out",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base, { failedId }) => {
      await page.goto(base + "/jobs");
      await page.getByTestId("page-login").waitFor();
      assert.equal(await page.getByTestId("page-jobs").count(), 0, "no page before login");
      await page.getByTestId("login-token").fill("wrong-token");
      await page.getByTestId("login-submit").click();
      await page.getByTestId("login-error").waitFor();
      await shot(page, "token-login-refused");

      await page.getByTestId("login-token").fill("ui-test-token-0123456789");
      await page.getByTestId("login-submit").click();
      await page.getByTestId("page-jobs").waitFor();
      await page.locator("[data-testid^=job-row-]").first().waitFor();
      // A change through the UI carries the session cookie (and the page's own origin).
      await page.goto(`${base}/jobs/${failedId}`);
      await retryOnJobPage(page, client, failedId);
      await shot(page, "token-logged-in");

      await page.getByTestId("logout-button").click();
      await page.getByTestId("page-login").waitFor();
      await page.reload();
      await page.getByTestId("page-login").waitFor();
    }, { authToken: "ui-test-token-0123456789", expectedConsole: /status of 401/ }),
});

Deno.test("a browser test that fails, even before its browser starts, drops its schema", async () => {
  const schema = freshSchema("ui");
  await assert.rejects(
    () =>
      withUi(false, () => Promise.resolve(), {
        schema,
        launch: () => Promise.reject(new Error("no browser here")),
      }),
    /no browser here/,
  );
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    const [r] =
      await sql`select count(*)::int as n from information_schema.schemata where schema_name = ${schema}`;
    assert.equal(r.n, 0, `schema ${schema} was left behind`);
  } finally {
    await sql.unsafe(`drop schema if exists "${schema}" cascade`);
    await sql.end();
  }
});

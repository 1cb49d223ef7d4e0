/**
 * The admin UI in a real browser (playwright-core driving Debian's chromium) against `svc serve`'s
 * router over 127.0.0.1: open the dashboard, filter jobs, open a job, retry a failed job, pause and
 * resume a queue; in read-only mode no mutation control is shown. Each page is saved as a screenshot
 * in tests/screenshots/ (git-ignored) for a person to look at.
 */
import assert from "node:assert/strict";
import { pendingCallback } from "../helpers/http.ts";
import { DATABASE_URL, freshSchema, TEST_ENGINE } from "../helpers/db.ts";
import { retryOnJobPage, shot, SKIP, waitCount, withUi } from "../helpers/ui.ts";
import postgres from "postgres";

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
      // One source for the charts: the samples (throughput and depth); the jobs-based chart is not shown.
      await page.getByTestId("samples-throughput-chart").waitFor();
      await page.getByTestId("samples-depth-chart").waitFor();
      assert.equal(await page.getByTestId("throughput-chart").count(), 0);
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

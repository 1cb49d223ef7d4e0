/**
 * Issue 29 in a real browser, at 1400 and 400 px: the job page's attempt timeline with each attempt's
 * stack collapsed under it, deleting a finished job, the dashboard's and the queues page's flag of jobs
 * nobody will run, the login form without the app's navigation, and a menu whose every entry fits.
 */
import assert from "node:assert/strict";
import { assertFits, shot, SKIP, withUi } from "../helpers/ui.ts";
import { claimById } from "../helpers/admin.ts";

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 400, height: 820 };

for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
  Deno.test({
    ignore: SKIP,
    name: `UI (${label}): attempt timeline with stacks, delete, jobs nobody will run, a menu that fits`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(false, async (page, client, base) => {
        // A job whose first attempt failed with a stack and whose second is running.
        const job = await client.enqueue("render_pdf", { doc: 7 }, { queue: "mail" });
        const a = await claimById(client, job.id);
        await client.engine.fail({
          id: job.id,
          lease: a.lease,
          error: "renderer crashed",
          stack: "Error: renderer crashed\n    at render (file:///app/pdf.ts:42:9)",
          terminal: false,
          retryDelayMs: 0,
        });
        await client.engine.promote();

        await page.goto(`${base}/jobs/${job.id}`);
        const timeline = page.getByTestId("attempt-timeline");
        await timeline.waitFor();
        const first = page.getByTestId("attempt-1");
        assert.match((await first.textContent()) ?? "", /Attempt 1\s*failed, retried/);
        assert.match((await first.textContent()) ?? "", /renderer crashed/);
        const stack = first.getByTestId("error-stack");
        assert.equal(
          await stack.evaluate((d: { open: boolean }) => d.open),
          false,
          "the stack starts collapsed",
        );
        assert.equal(await stack.locator("pre").isVisible(), false);
        await stack.locator("summary").click();
        assert.equal(await stack.locator("pre").isVisible(), true);
        assert.match(
          (await stack.locator("pre").textContent()) ?? "",
          /at render \(file:\/\/\/app\/pdf\.ts:42:9\)/,
        );
        await shot(page, `operators-${label}-timeline`);
        await assertFits(page, "job page");

        // Jobs nobody will run: queue "nowhere" has no runtime.
        await client.enqueue("x", {}, { queue: "nowhere" });
        await page.goto(base + "/");
        await page.getByTestId("unserved-nowhere").waitFor();
        assert.match(
          (await page.getByTestId("unserved-nowhere").textContent()) ?? "",
          /nowhere: 1 available, no live runtime serves this queue/,
        );
        await shot(page, `operators-${label}-dashboard-unserved`);
        await assertFits(page, "dashboard");
        await page.goto(base + "/queues");
        await page.getByTestId("queue-unserved-nowhere").waitFor();
        await page.goto(`${base}/jobs/${(await client.listJobs({ queue: "nowhere" })).jobs[0].id}`);
        await page.getByTestId("job-unserved").filter({ hasText: "no live runtime serves queue nowhere" })
          .waitFor();

        // Delete a finished job from its page: confirmed, then gone.
        const done = await client.enqueue("cleanup", {}, { queue: "mail" });
        const d = await claimById(client, done.id);
        await client.engine.complete([{ id: done.id, lease: d.lease, result: 1 }], { keepCompleted: true });
        await page.goto(`${base}/jobs/${done.id}`);
        await page.getByTestId("job-state").filter({ hasText: "completed" }).waitFor();
        page.once("dialog", (dlg) => dlg.accept());
        await page.getByTestId("delete-button").click();
        await page.waitForURL(/\/jobs$/);
        await page.getByTestId("notice").filter({ hasText: `Job #${done.id} deleted.` }).waitFor();
        assert.equal(await client.getJob(done.id), null);
        // An unfinished job offers no delete.
        await page.goto(`${base}/jobs/${job.id}`);
        await page.getByTestId("attempt-timeline").waitFor();
        assert.equal(await page.getByTestId("delete-button").count(), 0);

        for (const path of ["/", "/running", "/jobs", "/queues", "/kinds", "/cron", "/runtimes"]) {
          await page.goto(base + path);
          await page.locator("[data-testid^=page-]").first().waitFor();
          // Measure the page with its data, not its "Loading…" placeholder.
          await page.getByText("Loading…").first().waitFor({ state: "detached" });
          await assertFits(page, path);
        }
      }, { viewport }),
  });
}

Deno.test({
  ignore: SKIP,
  name: "UI: the login form shows neither the app's navigation nor the job-id box",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, _client, base) => {
      await page.goto(base + "/queues");
      await page.getByTestId("page-login").waitFor();
      assert.equal(await page.locator("nav.nav").count(), 0);
      assert.equal(await page.getByTestId("find-job").count(), 0);
      await shot(page, "operators-login");
    }, { viewport: PHONE, authToken: "ui-test-token-0123456789", expectedConsole: /status of 401/ }),
});

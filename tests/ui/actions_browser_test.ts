/**
 * The admin UI's actions of issue 19 in a real browser: find a job by id from the top bar, enqueue a job
 * from the form (args JSON checked as typed), bulk cancel and bulk retry with a confirmation that states the
 * count of the dry run; in read-only mode none of these controls exists (finding a job still works); with a
 * token the UI's mutations go through its session (and its own origin). Desktop (1400 px) and phone (400 px).
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { shot, SKIP, withUi } from "../helpers/ui.ts";

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 400, height: 820 };

async function text(page: Page, testid: string): Promise<string> {
  return ((await page.getByTestId(testid).first().textContent()) ?? "").replace(/\s+/g, " ").trim();
}

/** Finds a job from the top bar's box. */
async function findJob(page: Page, id: string): Promise<void> {
  await page.getByTestId("find-job").fill(id);
  await page.getByTestId("find-job").press("Enter");
}

for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
  Deno.test({
    ignore: SKIP,
    name: `UI (${label}): find a job by id, enqueue from the form, bulk cancel and retry with counts`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(false, async (page, client, base, { failedId }) => {
        await page.goto(base + "/queues");
        await page.getByTestId("page-queues").waitFor();
        await findJob(page, `#${failedId}`);
        await page.waitForURL(new RegExp(`/jobs/${failedId}$`));
        await page.getByTestId("job-state").filter({ hasText: "failed" }).waitFor();
        await findJob(page, "abc");
        await page.getByTestId("find-job-error").waitFor();
        await findJob(page, "999999");
        await page.getByTestId("page-job").filter({ hasText: "There is no job with this id." }).waitFor();

        // Enqueue: bad args keep the button disabled and say why.
        await page.goto(base + "/jobs");
        await page.getByTestId("enqueue-open").click();
        await page.getByTestId("enqueue-kind").fill("send_sms");
        await page.getByTestId("enqueue-queue").fill("sms");
        await page.getByTestId("enqueue-args").fill('{"to": ');
        assert.match(await text(page, "enqueue-problem"), /^args: not valid JSON/);
        assert.equal(await page.getByTestId("enqueue-submit").isDisabled(), true);
        await page.getByTestId("enqueue-args").fill("[1, 2]");
        assert.match(await text(page, "enqueue-problem"), /args must be a JSON object/);
        assert.equal(await page.getByTestId("enqueue-submit").isDisabled(), true);
        await page.getByTestId("enqueue-args").fill('{"to": "+33600000000", "text": "hi"}');
        assert.equal(await text(page, "enqueue-problem"), "");
        await page.getByTestId("enqueue-priority").selectOption("1");
        await page.getByTestId("enqueue-run-at").fill("2031-06-01T09:30");
        await shot(page, `actions-${label}-enqueue-form`);
        await page.getByTestId("enqueue-submit").click();
        await page.getByTestId("page-job").filter({ hasText: "send_sms" }).waitFor();
        await page.getByTestId("job-state").filter({ hasText: "scheduled" }).waitFor();
        const id = Number(new URL(page.url()).pathname.split("/").pop());
        const job = (await client.getJob(id))!;
        assert.deepEqual([job.kind, job.queue, job.priority, job.args], [
          "send_sms",
          "sms",
          1,
          { to: "+33600000000", text: "hi" },
        ]);
        assert.ok(job.runAt.getTime() > Date.parse("2031-05-31T00:00:00Z"));
        await page.getByTestId("notice").filter({ hasText: `Enqueued job #${id}` }).waitFor();

        // Bulk cancel of queue media: the dry run counts 1 unfinished job (the other one completed).
        await page.goto(base + "/jobs?queue=media");
        await page.getByTestId("bulk-cancel-button").click();
        assert.match(
          await text(page, "bulk-confirm-text"),
          /^Cancel 1 job \(unfinished job\(s\) in queue media/,
        );
        await shot(page, `actions-${label}-bulk-cancel-confirm`);
        await page.getByTestId("bulk-cancel-confirm").click();
        await page.getByTestId("notice").filter({ hasText: "Cancelled 1 job." }).waitFor();
        const media = await client.listJobs({ queue: "media" });
        assert.deepEqual(media.jobs.map((j) => j.state).sort(), ["cancelled", "completed"]);

        // Bulk retry of the failed jobs: "Keep them" changes nothing, then confirm.
        await page.goto(base + "/jobs?state=failed");
        await page.getByTestId("bulk-retry-button").click();
        assert.match(await text(page, "bulk-confirm-text"), /^Retry 1 job \(failed job\(s\)/);
        await page.getByTestId("bulk-retry-cancel").click();
        await page.getByTestId("bulk-retry-button").waitFor();
        assert.equal((await client.getJob(failedId))!.state, "failed");
        await page.getByTestId("bulk-retry-button").click();
        await page.getByTestId("bulk-retry-confirm").click();
        await page.getByTestId("notice").filter({ hasText: "Retried 1 job." }).waitFor();
        assert.equal((await client.getJob(failedId))!.state, "available");
        // A filter with nothing to act on says so instead of offering a button.
        await page.getByTestId("bulk-retry-button").click();
        assert.match(await text(page, "bulk-confirm-text"), /^No failed job\(s\) to retry/);
        assert.equal(await page.getByTestId("bulk-retry-confirm").count(), 0);
      }, { viewport, expectedConsole: /status of 404/ }), // the browser's own line for job 999999
  });

  Deno.test({
    ignore: SKIP,
    name: `UI (${label}, read-only): no enqueue form nor bulk action; finding a job still works`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(true, async (page, _client, base, { failedId }) => {
        for (const path of ["/jobs", "/jobs?state=failed", "/jobs?queue=media"]) {
          await page.goto(base + path);
          await page.getByTestId("page-jobs").waitFor();
          await page.locator("[data-testid^=job-row-]").first().waitFor();
          for (const c of ["enqueue-panel", "bulk-bar", "bulk-retry-button", "bulk-cancel-button"]) {
            assert.equal(await page.getByTestId(c).count(), 0, `${c} on ${path}`);
          }
        }
        await findJob(page, String(failedId));
        await page.getByTestId("job-state").filter({ hasText: "failed" }).waitFor();
        await shot(page, `actions-${label}-ro-job`);
      }, { viewport }),
  });
}

Deno.test({
  ignore: SKIP,
  name: "UI with a token: enqueue and bulk cancel go through the session cookie and the page's own origin",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base) => {
      await page.goto(base + "/jobs");
      await page.getByTestId("login-token").fill("ui-test-token-0123456789");
      await page.getByTestId("login-submit").click();
      await page.getByTestId("page-jobs").waitFor();
      await page.getByTestId("enqueue-open").click();
      await page.getByTestId("enqueue-kind").fill("token_job");
      await page.getByTestId("enqueue-submit").click();
      await page.getByTestId("page-job").filter({ hasText: "token_job" }).waitFor();
      assert.equal((await client.listJobs({ kind: "token_job" })).jobs.length, 1);
      await page.goto(base + "/jobs?kind=token_job");
      await page.getByTestId("bulk-cancel-button").click();
      await page.getByTestId("bulk-cancel-confirm").click();
      await page.getByTestId("notice").filter({ hasText: "Cancelled 1 job." }).waitFor();
      assert.equal((await client.listJobs({ kind: "token_job" })).jobs[0].state, "cancelled");
    }, { viewport: DESKTOP, authToken: "ui-test-token-0123456789", expectedConsole: /status of 401/ }),
});

/**
 * The admin UI of issue 19 in a real browser: the fixed bugs (history errors, the attempt limit that
 * applied, times with their offset, the cron's next fire, the callbacks table and the phone layout), at a
 * desktop (1400 px) and a phone (400 px) width, read-write and read-only. Screenshots go to
 * tests/screenshots/ (git-ignored).
 */
import assert from "node:assert/strict";
import type { Locator, Page } from "playwright-core";
import type { Client } from "../../src/client/client.ts";
import { claimById, setState } from "../helpers/admin.ts";
import { staleRuntime } from "../helpers/db.ts";
import { pendingCallback } from "../helpers/http.ts";
import { shot, SKIP, withUi } from "../helpers/ui.ts";

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 400, height: 820 };

/** How far an element's content overflows its box sideways (0: it fits). */
function overflowX(l: Locator): Promise<number> {
  return l.evaluate((el: { scrollWidth: number; clientWidth: number }) => el.scrollWidth - el.clientWidth);
}

async function text(page: Page, testid: string): Promise<string> {
  return ((await page.getByTestId(testid).first().textContent()) ?? "").replace(/\s+/g, " ").trim();
}

/** A completed job whose first two attempts failed, and a job that gave up at its kind's limit of 2. */
async function seedHistory(client: Client): Promise<{ completedId: number; limitedId: number }> {
  const [done, limited] = await client.enqueueMany([
    { kind: "sync_crm", queue: "default", args: { full: true } },
    { kind: "flaky_call", queue: "default", args: { url: "https://example.com" }, maxAttempts: 25 },
  ]);
  await setState(client, [done.id], "completed", [{ error: "timeout after 30 s" }, { error: "HTTP 502" }]);
  await setState(client, [limited.id], "failed", [{ error: "HTTP 500" }, { error: "HTTP 500 again" }], {
    flaky_call: { maxAttempts: 2 },
  });
  return { completedId: done.id, limitedId: limited.id };
}

for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
  Deno.test({
    ignore: SKIP,
    name:
      `UI (${label}): earlier errors as history, the kind's attempt limit, times with offset, cron next fire`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(false, async (page, client, base) => {
        const { completedId, limitedId } = await seedHistory(client);
        await page.goto(base + "/jobs");
        await page.getByTestId(`job-row-${completedId}`).waitFor();
        // The completed job's errors read as history, not in red.
        assert.equal(await text(page, `job-error-history-${completedId}`), "2 earlier failed attempts");
        assert.equal(await page.getByTestId(`job-row-${completedId}`).locator(".text-danger").count(), 0);
        // The failed job shows the limit that applied (its kind's 2), not its own 25.
        assert.equal(await text(page, `job-attempts-${limitedId}`), "2/2kind limit");
        assert.equal(await page.getByTestId(`job-row-${limitedId}`).locator(".text-danger").count(), 1);
        // Wait and run time columns have values for finished jobs.
        assert.match(await text(page, `job-run-${completedId}`), /^\d+ ms$|^\d+(\.\d)? s$/);
        // At 1400 px every column fits; on a phone the rows are stacked: nothing scrolls sideways.
        assert.equal(await overflowX(page.getByTestId("jobs-table")), 0, "jobs table scrolls sideways");
        assert.equal(await overflowX(page.locator("html")), 0, "page scrolls sideways");
        await shot(page, `ops-${label}-jobs`);

        await page.goto(`${base}/jobs/${limitedId}`);
        await page.getByTestId("job-attempt").filter({ hasText: "2 of 2" }).waitFor();
        assert.match(
          await text(page, "job-attempt"),
          /the kind's limit \(the job's own max_attempts is 25\)/,
        );
        assert.equal(await page.getByTestId("job-errors-history").count(), 0);

        await page.goto(`${base}/jobs/${completedId}`);
        await page.getByTestId("job-errors-history").waitFor();
        // Times: local with the offset (Paris is UTC+1 in November), UTC on hover.
        const created = page.getByTestId("page-job").locator("time").first();
        assert.match(
          (await created.textContent()) ?? "",
          /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+01:00 \(/,
        );
        assert.match((await created.getAttribute("title")) ?? "", /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
        await shot(page, `ops-${label}-job-history`);

        // A job waiting for its callback: the callbacks table shows every column without scrolling.
        const { job: waiting, callbackId } = await pendingCallback(client, { queue: "media" });
        await page.goto(`${base}/jobs/${waiting.id}`);
        await page.getByTestId(`callback-resolved-${callbackId}`).waitFor();
        assert.equal(await overflowX(page.getByTestId("job-callbacks")), 0, "callbacks table is cut off");
        assert.equal(await overflowX(page.locator("html")), 0, "job page scrolls sideways");
        await shot(page, `ops-${label}-job-callbacks`);

        // The cron's next fire is ahead: "in …", never "just now".
        await page.goto(base + "/cron");
        await page.getByTestId("cron-next-nightly_report").waitFor();
        assert.match(await text(page, "cron-next-nightly_report"), /^in \d+ (s|min|h)/);
        await shot(page, `ops-${label}-cron`);
      }, { viewport, timezoneId: "Europe/Paris" }),
  });
}

/**
 * On queue `ops`: two jobs claimed by worker-a (one of them may be held in its buffer: the attempt is counted
 * at claim and nothing is written when a held job starts, so both are running), one claimed by worker-c
 * that then died.
 */
async function seedRunning(client: Client): Promise<{ started: number; prefetched: number; stuck: number }> {
  const [a, b, c] = await client.enqueueMany([
    { kind: "encode_video", queue: "ops", args: { n: 1 } },
    { kind: "encode_video", queue: "ops", args: { n: 2 } },
    { kind: "encode_video", queue: "ops", args: { n: 3 } },
  ]);
  await claimById(client, a.id, {}, { runtimeId: "worker-a:101:x1" });
  await claimById(client, b.id, {}, { runtimeId: "worker-a:101:x1" });
  await claimById(client, c.id, {}, { runtimeId: "worker-c:303:z3" });
  await staleRuntime(client, "worker-c:303:z3");
  // The handler of a reported progress (ctx.progress), as the worker writes it.
  const lease = (await client.getJob(a.id))!.lease;
  await client.engine.writeProgress([{ id: a.id, lease, json: '{"done":3,"of":10}', at: new Date() }]);
  return { started: a.id, prefetched: b.id, stuck: c.id };
}

for (const readOnly of [false, true]) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
    const mode = readOnly ? "ro" : "rw";
    Deno.test({
      ignore: SKIP,
      name: `UI (${label}, ${mode}): running now per runtime (held jobs included), a stuck job highlighted`,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: () =>
        withUi(readOnly, async (page, client, base) => {
          const ids = await seedRunning(client);
          await page.goto(base + "/");
          await page.getByTestId("nav-running").click();
          await page.getByTestId("page-running").waitFor();
          await page.getByTestId(`running-row-${ids.started}`).waitFor();
          assert.equal(
            await text(page, "running-summary"),
            // Three cards: worker-a and worker-b (live, idle), worker-c (not live, still holding a job).
            "3 running, 0 prefetched, on 3 runtimes, 1 stuck",
          );
          assert.equal(await page.locator("[data-testid^=running-runtime-]").count(), 3, "as many cards");
          const a = page.getByTestId("running-runtime-worker-a:101:x1");
          assert.match((await a.textContent()) ?? "", /worker-a · pid 101/);
          assert.equal(await a.locator(".badge-leader").count(), 1);
          assert.equal(
            await page.getByTestId(`running-row-${ids.started}`).getAttribute("data-stuck"),
            "false",
          );
          assert.match(await text(page, `running-for-${ids.started}`), /^\d+(\.\d)? s$|^\d+ ms$/);
          assert.equal(await text(page, `running-progress-${ids.started}`), "3 / 10 (30 %)");
          // The job worker-a may hold unstarted is running too, in the same table.
          await page.getByTestId(`running-row-${ids.prefetched}`).waitFor();
          assert.equal(await text(page, `running-progress-${ids.prefetched}`), "–", "no progress reported");
          // worker-c stopped heartbeating 10 minutes ago: its job is stuck.
          await page.getByTestId(`running-stuck-${ids.stuck}`).waitFor();
          assert.equal(
            await page.getByTestId(`running-row-${ids.stuck}`).getAttribute("data-stuck"),
            "true",
          );
          // worker-b is live and runs nothing.
          await page.getByTestId("running-idle-worker-b:202:y2").waitFor();
          if (label === "phone") {
            assert.equal(await overflowX(page.locator("html")), 0, "page scrolls sideways");
          }
          await shot(page, `ops-${label}-${mode}-running`);
          // The job's page shows its progress too, with the value itself.
          await page.getByTestId(`running-row-${ids.started}`).getByRole("link").first().click();
          await page.getByTestId("job-progress").waitFor();
          assert.match(await text(page, "job-progress-summary"), /^3 \/ 10 \(30 %\) reported /);
          assert.match(await text(page, "job-progress-value"), /"done": 3/);
          assert.equal(await page.getByTestId("job-progress").count(), 1);
        }, { viewport }),
    });
  }
}

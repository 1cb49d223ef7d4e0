/**
 * The jobs list's own actions in a real browser, at 1400 and 400 px: each row's retry, cancel and delete
 * (offered only where they apply), a selection of rows with cancel, retry and delete applied to the
 * selected jobs only, no bulk "all matching" bar on the unfiltered list, and the list within the
 * viewport. The dashboard: held jobs counted apart from started ones, and its charts on one axis.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { assertFits, shot, SKIP, withUi } from "../helpers/ui.ts";
import { claimById } from "../helpers/admin.ts";

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 400, height: 820 };

const text = async (page: Page, id: string) => ((await page.getByTestId(id).textContent()) ?? "").trim();

for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
  Deno.test({
    ignore: SKIP,
    name: `UI (${label}): jobs list row actions and a selection acted on by ids`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(false, async (page, client, base, { failedId }) => {
        const state = async (id: number) => (await client.getJob(id))?.state ?? null;
        const waitState = async (id: number, want: string | null) => {
          for (let i = 0; i < 100 && (await state(id)) !== want; i++) {
            await new Promise((r) => setTimeout(r, 50));
          }
          assert.equal(await state(id), want, `job ${id}`);
        };
        const [s1, s2, s3] = await client.enqueueMany([
          { kind: "sel", queue: "sel", args: { n: 1 } },
          { kind: "sel", queue: "sel", args: { n: 2 } },
          { kind: "sel", queue: "sel", args: { n: 3 } },
        ]);
        const completed = (await client.listJobs({ state: "completed" })).jobs[0].id;

        await page.goto(base + "/jobs");
        await page.getByTestId(`job-row-${s1.id}`).waitFor();
        // The unfiltered list has no "all matching" bar, and no selection bar until a row is checked.
        assert.equal(await page.getByTestId("bulk-bar").count(), 0);
        assert.equal(await page.getByTestId("bulk-cancel-button").count(), 0);
        assert.equal(await page.getByTestId("selection-bar").count(), 0);
        // Actions offered where they apply: a failed job retry and delete, an available one cancel.
        assert.equal(await page.getByTestId(`row-retry-${failedId}`).count(), 1);
        assert.equal(await page.getByTestId(`row-delete-${failedId}`).count(), 1);
        assert.equal(await page.getByTestId(`row-cancel-${failedId}`).count(), 0);
        assert.equal(await page.getByTestId(`row-cancel-${s1.id}`).count(), 1);
        assert.equal(await page.getByTestId(`row-retry-${s1.id}`).count(), 0);
        assert.equal(await page.getByTestId(`row-delete-${s1.id}`).count(), 0);
        await shot(page, `jobs-actions-${label}-list`);
        await assertFits(page, "jobs list");

        // Row retry of the failed job, row cancel of s3, row delete of the completed job (confirmed).
        await page.getByTestId(`row-retry-${failedId}`).click();
        await page.getByTestId("notice").filter({ hasText: `Job #${failedId} retried.` }).waitFor();
        await waitState(failedId, "available");
        await page.getByTestId(`row-cancel-${s3.id}`).click();
        await page.getByTestId("notice").filter({ hasText: `Job #${s3.id} cancelled.` }).waitFor();
        await waitState(s3.id, "cancelled");
        page.once("dialog", (d) => d.dismiss());
        await page.getByTestId(`row-delete-${completed}`).click();
        assert.equal(await state(completed), "completed", "a dismissed confirmation deletes nothing");
        page.once("dialog", (d) => d.accept());
        await page.getByTestId(`row-delete-${completed}`).click();
        await page.getByTestId("notice").filter({ hasText: `Job #${completed} deleted.` }).waitFor();
        await waitState(completed, null);
        await page.getByTestId(`job-row-${completed}`).waitFor({ state: "detached" });

        // Select s1, s2 (available) and s3 (cancelled): cancel applies to two, the third is left alone.
        await page.getByTestId(`row-cancel-${s3.id}`).waitFor({ state: "detached" });
        for (const j of [s1, s2, s3]) await page.getByTestId(`select-${j.id}`).check();
        assert.equal(await text(page, "selection-count"), "3 jobs selected");
        assert.equal(await text(page, "selection-cancel"), "Cancel 2");
        assert.equal(await text(page, "selection-retry"), "Retry 1");
        assert.equal(await text(page, "selection-delete"), "Delete 1");
        await shot(page, `jobs-actions-${label}-selection`);
        await assertFits(page, "jobs list with a selection");
        await page.getByTestId("selection-cancel").click();
        assert.match(await text(page, "selection-confirm-text"), /^Cancel 2 jobs\?$/);
        await page.getByTestId("selection-cancel-keep").click();
        assert.equal(await state(s1.id), "available", "kept: nothing cancelled");
        await page.getByTestId("selection-cancel").click();
        await page.getByTestId("selection-cancel-confirm").click();
        await page.getByTestId("notice").filter({
          hasText: "Cancelled 2 jobs of the selection (1 job left alone: cancel does not apply to them).",
        }).waitFor();
        assert.deepEqual(await Promise.all([s1, s2, s3].map((j) => state(j.id))), [
          "cancelled",
          "cancelled",
          "cancelled",
        ]);
        assert.equal(await page.getByTestId("selection-bar").count(), 0, "the selection is cleared");
        assert.equal(await state(failedId), "available", "a job not selected is untouched");

        // Retry the selection (retry runs at once), then delete two of them (confirmed).
        for (const j of [s1, s2]) await page.getByTestId(`select-${j.id}`).check();
        await page.getByTestId("selection-retry").click();
        await page.getByTestId("notice").filter({ hasText: "Retried 2 jobs of the selection." }).waitFor();
        assert.deepEqual(await Promise.all([s1, s2, s3].map((j) => state(j.id))), [
          "available",
          "available",
          "cancelled",
        ]);
        await page.getByTestId(`row-cancel-${s1.id}`).waitFor();
        await page.getByTestId(`select-${s3.id}`).check();
        await page.getByTestId("selection-delete").click();
        assert.match(await text(page, "selection-confirm-text"), /^Delete 1 job for good/);
        await page.getByTestId("selection-delete-confirm").click();
        await page.getByTestId("notice").filter({ hasText: "Deleted 1 job of the selection." }).waitFor();
        await waitState(s3.id, null);

        // The header checkbox selects the whole page; a filtered list shows the "all matching" bar.
        await page.goto(base + "/jobs?queue=sel");
        await page.getByTestId(`job-row-${s1.id}`).waitFor();
        await page.getByTestId("bulk-cancel-button").waitFor();
        await page.getByTestId("select-all").check();
        assert.equal(await text(page, "selection-count"), "2 jobs selected");
        await page.getByTestId("select-all").uncheck();
        assert.equal(await page.getByTestId("selection-bar").count(), 0);
      }, { viewport }),
  });
}

Deno.test({
  ignore: SKIP,
  name: "UI: the dashboard counts held jobs apart from running ones; its two charts share one time axis",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base) => {
      const [a, b, c] = await client.enqueueMany([
        { kind: "k", queue: "mail", args: { n: 1 } },
        { kind: "k", queue: "mail", args: { n: 2 } },
        { kind: "k", queue: "mail", args: { n: 3 } },
      ]);
      for (const j of [a, b, c]) await claimById(client, j.id, {}, { runtimeId: "worker-a:101:x1" });
      // worker-a runs a and holds b and c in its buffer (as its heartbeat says).
      await client.engine.upsertRuntime({
        id: "worker-a:101:x1",
        hostname: "worker-a",
        pid: 101,
        queues: ["mail", "media"],
        ready: true,
        leader: true,
        health: { in_flight: 1, held: 2, held_jobs: [b.id, c.id] },
      });
      const held = 2;
      await page.goto(base + "/");
      // The stats and the runtimes arrive apart: wait until both are in.
      await page.getByTestId("state-held-running").filter({ hasText: `+ ${held} held` }).waitFor();
      await page.getByTestId("state-count-running").filter({ hasText: /^\d+$/ }).waitFor();
      assert.equal(await text(page, "state-count-running"), String(3 - held));
      assert.equal(await text(page, "state-held-running"), held ? `+ ${held} held` : "none held");

      // Both charts come from the samples: the same minutes under both.
      await page.getByTestId("samples-depth-chart").waitFor();
      const axis = async (id: string) =>
        await page.getByTestId(id).locator("text.axis-x, text.axis").allTextContents();
      const ticks = (await axis("samples-throughput-chart")).filter((t) => /:/.test(t));
      assert.ok(ticks.length >= 2, JSON.stringify(ticks));
      assert.deepEqual((await axis("samples-depth-chart")).filter((t) => /:/.test(t)), ticks);
      assert.equal(await page.getByTestId("throughput-chart").count(), 0);
      await page.goto(base + "/running");
      await page.getByTestId("running-summary").waitFor();
      assert.match(await text(page, "running-summary"), /^1 running, 2 prefetched, on 2 runtimes, /);
      await page.getByTestId(`running-row-${a.id}`).waitFor();
      await page.getByTestId(`prefetched-job-${b.id}`).waitFor();
      await page.getByTestId(`prefetched-job-${c.id}`).waitFor();
    }, { viewport: DESKTOP }),
});

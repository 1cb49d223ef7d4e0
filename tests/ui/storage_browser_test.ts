/**
 * The dashboard's storage card in words, in a real browser: on queue storage the transition is complete;
 * on canonical the test walks the transition (prepare, a blocker named, the mixed transition with its
 * backlog draining) and reads what the card says at each step. Desktop (1400 px) and phone (400 px).
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { TEST_ENGINE } from "../helpers/db.ts";
import { shot, SKIP, withUi } from "../helpers/ui.ts";

async function text(page: Page, testid: string): Promise<string> {
  return ((await page.getByTestId(testid).first().textContent()) ?? "").replace(/\s+/g, " ").trim();
}

/** Waits until the card's `testid` part contains `want` (the dashboard polls every 2 s). */
async function waitText(page: Page, testid: string, want: RegExp): Promise<void> {
  await page.getByTestId(testid).filter({ hasText: want }).waitFor({ timeout: 15_000 });
}

for (
  const [label, viewport] of [["desktop", { width: 1400, height: 900 }], ["phone", {
    width: 400,
    height: 820,
  }]] as const
) {
  Deno.test({
    ignore: SKIP,
    name:
      `UI (${label}): the storage card says which engine writes go to, the transition state and next step`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withUi(false, async (page, client, base) => {
        await page.goto(base + "/");
        await page.getByTestId("storage-card").waitFor();
        if (TEST_ENGINE === "queue_storage") {
          await waitText(page, "storage-words", /New jobs are written to queue_storage: append-only ring/);
          assert.match(
            await text(page, "storage-state-words"),
            /^Transition state:active Only queue storage runs and takes writes/,
          );
          assert.equal(await text(page, "storage-next"), "The transition is complete: no step is left.");
          assert.equal(await page.getByTestId("storage-progress").count(), 0);
          await shot(page, `storage-${label}-active`);
          return;
        }
        await waitText(page, "storage-words", /New jobs are written to canonical: one jobs table/);
        assert.match(
          await text(page, "storage-state-words"),
          /^Transition state:canonical Every job is in the canonical table/,
        );
        assert.match(await text(page, "storage-next"), /^Next step: prepare queue storage/);

        assert.equal((await client.storageStep("prepare")).outcome, "changed");
        await waitText(page, "storage-state-words", /^Transition state:prepared Queue storage is prepared/);
        assert.match(await text(page, "storage-next"), /enter the mixed transition/);
        // The seeded runtimes report no engines: canonical only, which blocks the next step.
        await page.getByTestId("storage-blockers").waitFor();
        assert.match(await text(page, "storage-runtimes"), /0 can run queue storage, 2 canonical only/);
        await shot(page, `storage-${label}-prepared`);

        for (
          const [id, hostname, pid] of [["worker-a:101:x1", "worker-a", 101], [
            "worker-b:202:y2",
            "worker-b",
            202,
          ]] as const
        ) {
          await client.engine.upsertRuntime({
            id,
            hostname,
            pid,
            queues: ["mail", "media"],
            engines: ["canonical", "queue_storage"],
            ready: true,
            leader: id.startsWith("worker-a"),
            health: {},
          });
        }
        assert.equal((await client.storageStep("enter-mixed-transition")).outcome, "changed");
        // The seed left 3 unfinished jobs in canonical (2 available, 1 scheduled).
        await waitText(page, "storage-backlog", /^3 jobs left in canonical/);
        assert.match(await text(page, "storage-next"), /finalize once the canonical backlog is 0/);
        const [one] = (await client.listJobs({ state: "available", limit: 1 })).jobs;
        await client.cancel(one.id);
        await waitText(page, "storage-backlog", /^2 jobs left in canonical \(33% of 3 drained\)/);
        await shot(page, `storage-${label}-mixed`);
      }, { viewport }),
  });
}

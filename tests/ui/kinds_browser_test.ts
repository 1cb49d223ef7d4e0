/**
 * The Kinds page and the per-queue/per-kind charts, in a real browser, from per-minute samples written as
 * the leader writes them: per kind the last hour's attempts, failure rate and run-time p50/p95; the charts
 * follow the queue and kind picked. Without the samples route (a server that predates it answers 404) the
 * pages show an empty state, not an error. Desktop (1400 px) and phone (400 px), read-write and read-only.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import type { Client } from "../../src/client/client.ts";
import { maintainSamplePartitions, writeSamples } from "../../src/storage/shared/samples.ts";
import { shot, SKIP, withUi } from "../helpers/ui.ts";

async function text(page: Page, testid: string): Promise<string> {
  return ((await page.getByTestId(testid).first().textContent()) ?? "").replace(/\s+/g, " ").trim();
}

/** Two finished minutes of samples: mail/send_email 10 completed, 1 failed, 2 retried; media/resize_image 4. */
async function seedSamples(client: Client): Promise<void> {
  await maintainSamplePartitions(client.db, client.names);
  const [{ now }] = await client.sql`select date_trunc('minute', now()) as now`;
  for (const back of [3, 2]) {
    const minute = new Date(new Date(now).getTime() - back * 60_000);
    const wrote = await writeSamples(
      client.db,
      client.names,
      minute,
      [
        { queue: "mail", depth: 5 + back, estimated: false, oldestAvailableAgeSeconds: 3 },
        { queue: "media", depth: 2, estimated: false, oldestAvailableAgeSeconds: 1 },
      ],
      [
        {
          queue: "mail",
          kind: "send_email",
          completed: 10,
          failed: 1,
          retried: 2,
          runP50Ms: 120,
          runP95Ms: 900,
        },
        {
          queue: "media",
          kind: "resize_image",
          completed: 4,
          failed: 0,
          retried: 0,
          runP50Ms: 2000,
          runP95Ms: 4500,
        },
      ],
    );
    assert.ok(wrote, "samples written");
  }
}

for (const readOnly of [false, true]) {
  for (
    const [label, viewport] of [["desktop", { width: 1400, height: 900 }], ["phone", {
      width: 400,
      height: 820,
    }]] as const
  ) {
    const mode = readOnly ? "ro" : "rw";
    Deno.test({
      ignore: SKIP,
      name: `UI (${label}, ${mode}): Kinds page from the samples, per-queue and per-kind charts`,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: () =>
        withUi(readOnly, async (page, client, base) => {
          await seedSamples(client);
          await page.goto(base + "/");
          await page.getByTestId("nav-kinds").click();
          await page.getByTestId("kind-row-send_email").waitFor();
          assert.equal(await text(page, "kind-completed-send_email"), "20");
          assert.equal(await text(page, "kind-failed-send_email"), "2");
          assert.match(await text(page, "kind-rate-send_email"), /^\d+(\.\d)?%$/);
          assert.equal(await text(page, "kind-p50-send_email"), "120 ms");
          assert.equal(await text(page, "kind-p95-send_email"), "900 ms");
          assert.equal(await text(page, "kind-p50-resize_image"), "2.0 s");
          assert.equal(await text(page, "kind-p95-resize_image"), "4.5 s");
          assert.equal(await text(page, "kind-rate-resize_image"), "0%");
          // All queues: 28 completed in the window; the depth chart is there.
          await page.getByTestId("samples-throughput-completed-total").filter({ hasText: /^28$/ }).waitFor();
          await page.getByTestId("samples-depth-chart").waitFor();
          // The latest sampled depth of both queues: mail 7 + media 2.
          assert.equal(await text(page, "samples-depth-depth-total"), "9");
          await shot(page, `kinds-${label}-${mode}`);
          // One kind's chart: its attempts only, and depth is per queue only.
          await page.getByTestId("kind-chart-resize_image").click();
          await page.waitForURL(/kind=resize_image/);
          await page.getByTestId("samples-throughput-completed-total").filter({ hasText: /^8$/ }).waitFor();
          assert.equal(await text(page, "samples-throughput-failed-total"), "0");
          await page.getByTestId("samples-depth-per-queue").waitFor();
          // The dashboard's charts follow the queue picked.
          await page.goto(base + "/");
          await page.getByTestId("samples-queue").selectOption("mail");
          await page.waitForURL(/queue=mail/);
          await page.getByTestId("samples-throughput-completed-total").filter({ hasText: /^20$/ }).waitFor();
          assert.equal(await text(page, "samples-throughput-retried-total"), "4");
          await page.getByTestId("samples-depth-chart").waitFor();
          await shot(page, `dashboard-${label}-${mode}-queue-mail`);
        }, { viewport }),
    });
  }
}

Deno.test({
  ignore: SKIP,
  name: "UI without the samples route (404) and an older /api/kinds: empty states, no error banner",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, _client, base) => {
      await page.route("**/api/stats/samples**", (r) =>
        r.fulfill({
          status: 404,
          contentType: "application/json",
          body: JSON.stringify({ error: "no route GET /api/stats/samples", code: "not_found" }),
        }));
      await page.route("**/api/kinds", async (r) => {
        try {
          const res = await r.fetch();
          const body = await res.json();
          // The shape of a server before the samples: counts only.
          body.kinds = body.kinds.map((k: { kind: string; counts: unknown }) => ({
            kind: k.kind,
            counts: k.counts,
          }));
          await r.fulfill({ response: res, json: body });
        } catch (e) {
          // The page refreshes /api/kinds on a timer: a refresh in flight when the test closes the page
          // fails here, after the assertions; anything else is the test's failure.
          if (!page.isClosed() && !/disposed|closed/i.test(String(e))) throw e;
        }
      });
      await page.goto(base + "/kinds");
      await page.getByTestId("kind-row-send_email").waitFor();
      assert.equal(await text(page, "kind-p50-send_email"), "–");
      assert.equal(await text(page, "kind-rate-send_email"), "–");
      await page.getByTestId("samples-unavailable").waitFor();
      await page.goto(base + "/");
      // Without samples the dashboard falls back to the throughput of finished jobs, alone.
      await page.getByTestId("throughput-chart").waitFor();
      assert.equal(await page.getByTestId("samples-unavailable").count(), 0);
      assert.equal(await page.getByTestId("error-banner").count(), 0);
      await page.unrouteAll({ behavior: "ignoreErrors" });
    }, { expectedConsole: /status of 404/ }),
});

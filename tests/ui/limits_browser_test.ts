/**
 * The queue page's fleet-wide limits in a real browser: the rate shown with its use, set and removed from the
 * row's editor (through `PUT /api/queues/:name/limit`), in read-only mode without the editor; concurrency and
 * per-key limits shown with their use, and set from the editor beside a rate without losing it.
 */
import assert from "node:assert/strict";
import { SKIP, withUi } from "../helpers/ui.ts";
import { TEST_ENGINE } from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";

Deno.test({
  ignore: SKIP,
  name: "UI: a queue's rate limit is shown with its use, set from the queue page and removed",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base) => {
      await client.enqueue("k", {}, { queue: "mail" });
      await client.setQueueLimit("mail", { rate: 20, per: 60_000 });
      await page.goto(base + "/queues");
      const badge = page.getByTestId("queue-limit-mail");
      await badge.filter({ hasText: "rate 20/1m · 0 in window" }).waitFor();

      await page.getByTestId("queue-limit-edit-mail").click();
      assert.equal(
        await page.getByTestId("queue-limit-rate-mail").inputValue(),
        "20",
        "the editor starts from the limit",
      );
      await page.getByTestId("queue-limit-rate-mail").fill("5");
      await page.getByTestId("queue-limit-per-mail").fill("1000");
      await page.getByTestId("queue-limit-save-mail").click();
      await badge.filter({ hasText: "rate 5/1s" }).waitFor();
      const [stored] = await client.listQueueLimits();
      assert.deepEqual([stored.rate, stored.per, stored.setBy], [5, 1000, "api"]);

      await page.getByTestId("queue-limit-edit-mail").click();
      await page.getByTestId("queue-limit-remove-mail").click();
      await badge.waitFor({ state: "detached" });
      const [kept] = await client.listQueueLimits();
      assert.equal(kept.rate, null, "removed, the row kept without limits");
    }),
});

Deno.test({
  ignore: SKIP,
  name: "UI (read-only): the rate limit is shown, without its editor",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(true, async (page, client, base) => {
      await client.enqueue("k", {}, { queue: "mail" });
      await client.setQueueLimit("mail", { rate: 3, per: 500 });
      await page.goto(base + "/queues");
      await page.getByTestId("queue-limit-mail").filter({ hasText: "rate 3/500ms" }).waitFor();
      assert.equal(await page.getByTestId("queue-limit-edit-mail").count(), 0);
    }),
});

Deno.test({
  ignore: SKIP || TEST_ENGINE !== "queue_storage",
  name: "UI: a queue's concurrency and per-key limits are shown with their use",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(true, async (page, client, base) => {
      await client.enqueueMany(["a", "a", "b"].map((k) => ({ kind: "k", queue: "pay", limitKey: k })));
      await client.setQueueLimit("pay", { concurrency: 5, perKey: { concurrency: 1 } });
      const got = await claim(client, "pay", 5, "t");
      assert.equal(got.length, 2, "one job of each key");
      await page.goto(base + "/queues");
      await page.getByTestId("queue-concurrency-pay").filter({ hasText: "concurrency 5 · 2 in use" })
        .waitFor();
      await page.getByTestId("queue-per-key-pay").filter({ hasText: "per key 1 · 2 keys in use" }).waitFor();
    }),
});

Deno.test({
  ignore: SKIP || TEST_ENGINE !== "queue_storage",
  name: "UI: the Running page says which limit holds a runtime's queue back",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(true, async (page, client, base) => {
      await client.enqueueMany(["a", "a"].map((k) => ({ kind: "k", queue: "pay", limitKey: k })));
      await client.setQueueLimit("pay", { perKey: { concurrency: 1 } });
      const id = "worker-p:7:x1";
      assert.equal((await claim(client, "pay", 2, id)).length, 1);
      // The worker's heartbeat names the limit that cut its last claim short (src/worker/worker.ts).
      await client.engine.upsertRuntime({
        id,
        hostname: "worker-p",
        pid: 7,
        queues: ["pay"],
        ready: true,
        leader: false,
        health: {
          in_flight: 1,
          throttled: [{ queue: "pay", limit: "per_key", since: new Date(Date.now() - 5_000).toISOString() }],
        },
      });
      await page.goto(base + "/running");
      await page.getByTestId(`throttled-${id}-pay`).filter({
        hasText: /^pay: limited \(per-key limit\) since/,
      })
        .waitFor();
    }),
});

Deno.test({
  ignore: SKIP || TEST_ENGINE !== "queue_storage",
  name:
    "UI: the limits editor sets concurrency and per-key limits beside a rate, and keeps what it does not change",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withUi(false, async (page, client, base) => {
      await client.enqueue("k", {}, { queue: "pay" });
      await client.setQueueLimit("pay", { rate: 20, per: 60_000 });
      await page.goto(base + "/queues");
      await page.getByTestId("queue-limit-pay").filter({ hasText: "rate 20/1m" }).waitFor();
      await page.getByTestId("queue-limit-edit-pay").click();
      assert.equal(
        await page.getByTestId("queue-limit-concurrency-pay").inputValue(),
        "",
        "no concurrency yet",
      );
      await page.getByTestId("queue-limit-concurrency-pay").fill("5");
      await page.getByTestId("queue-limit-per-key-pay").fill("1");
      await page.getByTestId("queue-limit-count-parked-pay").check();
      await page.getByTestId("queue-limit-save-pay").click();
      await page.getByTestId("queue-concurrency-pay").filter({ hasText: "concurrency 5 · 0 in use" })
        .waitFor();
      await page.getByTestId("queue-per-key-pay").filter({ hasText: "per key 1" }).waitFor();
      const [set] = await client.listQueueLimits();
      assert.deepEqual(
        [set.rate, set.per, set.concurrency, set.perKey, set.countParked, set.setBy],
        [20, 60_000, 5, 1, true, "api"],
        "the rate kept, the new limits stored",
      );

      // The editor starts from what is stored; clearing a field removes that kind only.
      await page.getByTestId("queue-limit-edit-pay").click();
      assert.equal(await page.getByTestId("queue-limit-per-key-pay").inputValue(), "1");
      assert.equal(await page.getByTestId("queue-limit-count-parked-pay").isChecked(), true);
      await page.getByTestId("queue-limit-rate-pay").fill("");
      await page.getByTestId("queue-limit-save-pay").click();
      await page.getByTestId("queue-limit-pay").waitFor({ state: "detached" });
      const [after] = await client.listQueueLimits();
      assert.deepEqual([after.rate, after.concurrency, after.perKey], [null, 5, 1]);
    }),
});

/**
 * Jobs nobody will run: available jobs in a queue no live runtime serves, and jobs of a kind no live
 * runtime of their queue has a handler for, flagged on GET /api/stats, /api/queues, /api/jobs/:id and
 * `svc queue list`; runtimes report their kinds (a real worker, and a process that reports none).
 */
import assert from "node:assert/strict";
import { withApi } from "../helpers/admin.ts";
import { startWorker } from "../helpers/worker.ts";
import { svcIn } from "../helpers/cli.ts";

Deno.test("unserved queues and unhandled kinds are flagged on the dashboard's stats, the queues, the job and svc queue list", () =>
  withApi(async ({ call, client, schema }) => {
    const [lost, handled, unhandled, legacy, scheduledLost] = await client.enqueueMany([
      { kind: "x", queue: "nowhere" },
      { kind: "a", queue: "default" },
      { kind: "b", queue: "default" },
      { kind: "b", queue: "legacy" },
      { kind: "x", queue: "nowhere", runAt: new Date(Date.now() + 3_600_000) },
    ]);
    // A real worker serving default with a handler for a only (it claims nothing: default's queue is paused).
    await client.pauseQueue("default");
    const { stop } = await startWorker(client, { handlers: { a: () => "ok" }, queues: { default: {} } });
    try {
      // A process of an older version: serves legacy, reports no kinds (counts as handling every kind).
      await client.engine.upsertRuntime({
        id: "old:1:x",
        hostname: "old",
        pid: 1,
        queues: ["legacy"],
        ready: true,
        leader: false,
        health: {},
      });
      const runtimes = (await call("GET", "/api/runtimes")).body.runtimes;
      const worker = runtimes.find((r: any) => r.queues.includes("default"));
      assert.deepEqual(worker.kinds, ["a"], "a worker reports the kinds it has handlers for");
      assert.equal(runtimes.find((r: any) => r.id === "old:1:x").kinds, null);

      const stats = (await call("GET", "/api/stats")).body;
      assert.deepEqual(stats.unserved, [
        { queue: "default", available: 2, live_runtimes: 1, unhandled_kinds: ["b"] },
        { queue: "nowhere", available: 1, live_runtimes: 0, unhandled_kinds: [] },
      ]);
      const queues = new Map((await call("GET", "/api/queues")).body.queues.map((q: any) => [q.name, q]));
      assert.equal((queues.get("nowhere") as any).live_runtimes, 0);
      assert.deepEqual((queues.get("default") as any).unhandled_kinds, ["b"]);
      assert.equal((queues.get("legacy") as any).live_runtimes, 1);
      assert.deepEqual((queues.get("legacy") as any).unhandled_kinds, []);

      const why = async (id: number) => (await call("GET", `/api/jobs/${id}`)).body.unserved;
      assert.equal(await why(lost.id), "no live runtime serves queue nowhere");
      assert.equal(await why(scheduledLost.id), "no live runtime serves queue nowhere", "nor when it is due");
      assert.equal(
        await why(unhandled.id),
        "none of the 1 live runtime(s) serving queue default has a handler for kind b",
      );
      assert.equal(await why(handled.id), null);
      assert.equal(await why(legacy.id), null);

      const cli = await svcIn(schema, ["queue", "list"]);
      assert.equal(cli.code, 0, cli.stderr);
      assert.match(cli.stdout, /\ndefault\s+yes\s+2\s.*\s1\s+-\s+no handler for b\n/);
      assert.match(cli.stdout, /\nnowhere\s+no\s+1\s.*\s0\s+-\s+no live runtime serves this queue\n/);
      const json = JSON.parse((await svcIn(schema, ["queue", "list", "--json"])).stdout);
      const d = json.queues.find((q: any) => q.name === "default");
      assert.deepEqual([d.live_runtimes, d.unhandled_kinds], [1, ["b"]]);
    } finally {
      await stop();
    }
    // With the worker gone, default is served by nobody.
    await client.engine.deleteRuntime("old:1:x");
    const after = (await call("GET", "/api/stats")).body.unserved.map((u: any) => [u.queue, u.live_runtimes]);
    assert.deepEqual(after, [["default", 0], ["legacy", 0], ["nowhere", 0]]);
  }));

/**
 * What the engines keep in memory per attempt (the routed engine's owners, queue storage's locators) is
 * dropped at every end of an attempt: completed, failed and retried, snoozed, cancelled while running,
 * and HTTP jobs parked and then completed by callback. An idle worker keeps none.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { serveTest } from "../helpers/http.ts";
import { snooze, TerminalError } from "../../mod.ts";
import type { StorageEngine } from "../../src/storage/engine.ts";

Deno.test("per-attempt maps are empty once the worker is idle, after every kind of attempt end", async () => {
  const { client, drop } = await testClient();
  const callbacks: string[] = [];
  const fn = serveTest(async (req) => {
    callbacks.push((await req.json()).callback_id);
    return new Response(null, { status: 202 });
  });
  const engine = client.engine as StorageEngine;
  let release!: () => void;
  const held = new Promise<void>((r) => release = r);
  const snoozed = new Set<number>();
  const w = await startWorker(client, {
    queues: { default: { maxWorkers: 10 } },
    handlers: {
      ok: () => "done",
      boom: { maxAttempts: 2, backoff: () => 10, handler: () => Promise.reject(new Error("boom")) },
      terminal: () => {
        throw new TerminalError("no");
      },
      nap: (job) => {
        if (snoozed.has(job.id)) return "woke";
        snoozed.add(job.id);
        return snooze(50);
      },
      hang: () => held,
    },
    httpWorkers: { fn: { url: `${fn.url}/fn`, mode: "async", callbackBaseUrl: "http://127.0.0.1:9" } },
  });
  try {
    assert.equal(typeof engine.trackedAttempts, "function");
    const jobs = await client.enqueueMany([
      ...Array.from({ length: 20 }, () => ({ kind: "ok" })),
      ...Array.from({ length: 5 }, () => ({ kind: "boom" })),
      ...Array.from({ length: 5 }, () => ({ kind: "terminal" })),
      ...Array.from({ length: 5 }, () => ({ kind: "nap" })),
      ...Array.from({ length: 5 }, () => ({ kind: "fn" })),
    ]);
    const hang = await client.enqueue("hang", {});
    await waitFor(async () => (await client.getJob(hang.id))?.state === "running", 10_000, "hang to run");
    await client.cancel(hang.id);
    await waitFor(() => callbacks.length === 5, 10_000, "the HTTP jobs to reach the function");
    await waitFor(
      async () =>
        (await Promise.all(jobs.slice(35).map((j) => client.getJob(j.id)))).every((j) =>
          j?.state === "waiting_external"
        ),
      10_000,
      "the HTTP jobs to park",
    );
    for (const id of callbacks) await client.completeExternal(id, { ok: true });
    const ids = [...jobs.map((j) => j.id), hang.id];
    await waitFor(
      async () => {
        const all = await Promise.all(ids.map((id) => client.getJob(id)));
        return all.every((j) => ["completed", "failed", "cancelled"].includes(j!.state));
      },
      20_000,
      "every job to finish",
    );
    release();
    // The cancelled handler returns, its slot frees; nothing is left in the per-attempt maps.
    await waitFor(
      () => engine.trackedAttempts!() === 0,
      10_000,
      `the maps to empty (${engine.trackedAttempts!()})`,
    );
    const states = (await Promise.all(ids.map((id) => client.getJob(id)))).map((j) => j!.state);
    assert.equal(states.filter((s) => s === "completed").length, 30);
    assert.equal(states.filter((s) => s === "failed").length, 10);
    assert.equal(states.filter((s) => s === "cancelled").length, 1);
  } finally {
    release();
    await w.stop();
    await fn.close();
    await drop();
  }
});

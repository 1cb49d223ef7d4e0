/** The group-commit batcher behind completions, parks and callback resolutions. */
import assert from "node:assert/strict";
import { Batcher, ItemFailure } from "../../src/db/batcher.ts";

Deno.test("Batcher: items added together go in one call, in order, and a failed call rejects only its batch", async () => {
  const calls: number[][] = [];
  const b = new Batcher<number, string>((items) => {
    calls.push(items);
    if (items.includes(13)) return Promise.reject(new Error("unlucky"));
    return Promise.resolve(items.map((i) => i === 7 ? new ItemFailure(new Error("seven alone")) : `#${i}`));
  }, 3);
  const first = await Promise.all([1, 2, 3, 4].map((i) => b.add(i)));
  assert.deepEqual(first, ["#1", "#2", "#3", "#4"]);
  assert.deepEqual(calls, [[1, 2, 3], [4]], "one call per maxBatch items");
  const bad = b.add(13);
  const good = b.add(5);
  await assert.rejects(bad, /unlucky/);
  await assert.rejects(good, /unlucky/, "the same batch shares its failure");
  assert.equal(await b.add(6), "#6", "the next batch is written normally");
  const [six, seven] = await Promise.allSettled([b.add(6), b.add(7)]);
  assert.deepEqual(six, { status: "fulfilled", value: "#6" });
  assert.match(
    String((seven as PromiseRejectedResult).reason),
    /seven alone/,
    "an ItemFailure rejects its item only",
  );
  await b.drain();
  assert.equal(b.pending, 0);
});

Deno.test("Batcher with a linger: items added within it share one call; a full batch does not wait", async () => {
  const calls: number[][] = [];
  const b = new Batcher<number, number>(
    (items) => {
      calls.push(items);
      return Promise.resolve(items);
    },
    4,
    500,
  );
  const first = b.add(1);
  await new Promise((r) => setTimeout(r, 5)); // several macrotasks later, still within the linger
  const second = b.add(2);
  assert.deepEqual(await Promise.all([first, second]), [1, 2]);
  assert.deepEqual(calls, [[1, 2]], "one call for both");
  const t0 = performance.now();
  await Promise.all([3, 4, 5, 6].map((i) => b.add(i)));
  assert.deepEqual(calls[1], [3, 4, 5, 6]);
  assert.ok(performance.now() - t0 < 400, "a full batch is written without waiting out the 500 ms linger");
});

Deno.test("Batcher.addTo: each sink is told its item's output or failure; a sink that throws harms neither its neighbours nor the next batch", async () => {
  const b = new Batcher<number, string>((items) => {
    if (items.includes(13)) return Promise.reject(new Error("unlucky"));
    return Promise.resolve(items.map((i) => i === 7 ? new ItemFailure(new Error("seven alone")) : `#${i}`));
  }, 10);
  const told: string[] = [];
  const sink = (name: string, throws = false) => ({
    batchWritten(out: string) {
      told.push(`${name} ${out}`);
      if (throws) throw new Error(`${name} throws`);
    },
    batchFailed(e: unknown) {
      told.push(`${name} failed: ${(e as Error).message}`);
    },
  });
  // The thrown error surfaces as an unhandled rejection; catch it here so that it fails nothing.
  const surfaced: unknown[] = [];
  const onUnhandled = (ev: PromiseRejectionEvent) => {
    surfaced.push(ev.reason);
    ev.preventDefault();
  };
  globalThis.addEventListener("unhandledrejection", onUnhandled);
  try {
    b.addTo(1, sink("a", true));
    b.addTo(7, sink("b"));
    b.addTo(2, sink("c"));
    await b.drain();
    assert.deepEqual(told, ["a #1", "b failed: seven alone", "c #2"]);
    b.addTo(13, sink("d"));
    b.addTo(3, sink("e"));
    await b.drain();
    assert.deepEqual(
      told.slice(3),
      ["d failed: unlucky", "e failed: unlucky"],
      "a failed call fails its batch",
    );
    assert.equal(await b.add(4), "#4", "promises and sinks share the queue");
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(surfaced.map((e) => (e as Error).message), ["a throws"]);
  } finally {
    globalThis.removeEventListener("unhandledrejection", onUnhandled);
  }
});

/**
 * The completer against an in-memory fake of the engine's `complete`: a data error splits the batch
 * until the refused item is alone (its neighbours complete), an outage is retried within the budget,
 * and an error that retrying cannot fix is not retried.
 */
import assert from "node:assert/strict";
import { Completer } from "../../src/worker/completer.ts";
import type { Completion, StorageEngine } from "../../src/storage/engine.ts";
import { silentLogger } from "../../mod.ts";

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** An engine whose `complete` runs `fn` (the only method the completer calls). */
function fakeEngine(fn: (items: Completion[]) => Promise<number[]>): StorageEngine {
  return { complete: (items: Completion[]) => fn(items) } as unknown as StorageEngine;
}

Deno.test("completer: a batch refused for a data error is split; only the refused item fails, its neighbours complete", async () => {
  const calls: number[][] = [];
  const failed: [number, string][] = [];
  const c = new Completer(
    fakeEngine((items) => {
      calls.push(items.map((i) => i.id));
      if (items.some((i) => i.id === 7)) {
        return Promise.reject(pgError("22P05", "unsupported Unicode escape sequence"));
      }
      return Promise.resolve(items.map((i) => i.id));
    }),
    silentLogger,
    {
      deleteRows: false,
      retryBudgetMs: 1000,
      unstorable: (item, why) => {
        failed.push([item.id, why]);
        return Promise.resolve();
      },
      lingerMs: 20,
    },
  );
  const ids = Array.from({ length: 16 }, (_, i) => i + 1);
  const written = await Promise.all(ids.map((id) => c.add({ id, lease: 1, result: null })));
  assert.deepEqual(written, ids.map((id) => id !== 7));
  assert.deepEqual(failed, [[7, "unsupported Unicode escape sequence"]]);
  assert.deepEqual(calls[0], ids, "one batch first");
  assert.ok(
    calls.length <= 1 + 2 * Math.ceil(Math.log2(16)),
    `bisected, not one call per item: ${calls.length}`,
  );
});

Deno.test("completer: an outage is retried within the budget and then everything is written", async () => {
  let down = 3;
  const c = new Completer(
    fakeEngine((items) => {
      if (down-- > 0) {
        return Promise.reject(pgError("57P01", "terminating connection due to administrator command"));
      }
      return Promise.resolve(items.map((i) => i.id));
    }),
    silentLogger,
    { deleteRows: false, retryBudgetMs: 5000, unstorable: () => Promise.reject(new Error("not expected")) },
  );
  const written = await Promise.all([1, 2, 3].map((id) => c.add({ id, lease: 1, result: id })));
  assert.deepEqual(written, [true, true, true]);
  assert.equal(down, -1, "three failures, then the write that succeeded");
});

Deno.test("completer: past the budget the batch is given up (left to rescue); a statement error is not retried", async () => {
  let tries = 0;
  const gone = new Completer(
    fakeEngine(() => {
      tries++;
      return Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
    }),
    silentLogger,
    { deleteRows: false, retryBudgetMs: 400, unstorable: () => Promise.reject(new Error("not expected")) },
  );
  const t0 = Date.now();
  assert.deepEqual(await Promise.all([1, 2].map((id) => gone.add({ id, lease: 1, result: null }))), [
    false,
    false,
  ]);
  assert.ok(tries >= 2, `retried (${tries} tries)`);
  assert.ok(Date.now() - t0 < 2000, "gave up near the budget");

  let calls = 0;
  const broken = new Completer(
    fakeEngine(() => {
      calls++;
      return Promise.reject(pgError("42P01", 'relation "jobs" does not exist'));
    }),
    silentLogger,
    { deleteRows: false, retryBudgetMs: 5000, unstorable: () => Promise.reject(new Error("not expected")) },
  );
  assert.deepEqual(await broken.add({ id: 1, lease: 1, result: null }), false);
  assert.equal(calls, 1);
});

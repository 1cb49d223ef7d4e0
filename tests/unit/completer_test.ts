/**
 * The completer (`src/worker/completer.ts`) over the in-memory fake engine: completions queued together
 * share one statement, start records go in the statement of the completions beside them, a data error
 * splits the batch until the refused item is alone, connection errors are retried within the budget,
 * a write still failing past the budget is given up (left to rescue), a statement error is not retried.
 * No database.
 */
import assert from "node:assert/strict";
import { FakeEngine, pgError } from "../helpers/fake_engine.ts";
import { Completer } from "../../src/worker/completer.ts";
import type { AttemptRef, Completion } from "../../src/storage/engine.ts";
import { silentLogger } from "../../mod.ts";

const claimReq = { queue: "q", runtimeId: "rt", policies: {}, callbackTimeoutsMs: {}, prefetchTtlMs: 0 };

/** `n` running attempts (the first `free` started, the rest prefetched). */
async function running(engine: FakeEngine, n: number, free = n): Promise<AttemptRef[]> {
  engine.add(n);
  const jobs = await engine.claim({ ...claimReq, limit: n, free });
  return jobs.map((j) => ({ id: j.id, lease: j.lease }));
}

function completer(
  engine: FakeEngine,
  opts: { lingerMs?: number; maxBatch?: number; retryBudgetMs?: number } = {},
) {
  const unstorable: [number, string][] = [];
  const c = new Completer(engine, silentLogger, {
    deleteRows: false,
    retryBudgetMs: 2000,
    unstorable: (item, why) => {
      unstorable.push([item.id, why]);
      return Promise.resolve();
    },
    ...opts,
  });
  return { c, unstorable };
}

Deno.test("completer: completions queued together are written in one statement", async () => {
  const engine = new FakeEngine();
  const refs = await running(engine, 50);
  const { c } = completer(engine);
  const ok = await Promise.all(refs.map((r) => c.add({ ...r, result: r.id })));
  assert.deepEqual(ok, refs.map(() => true));
  assert.equal(engine.callsOf("complete").length, 1);
  assert.deepEqual(engine.inState("completed").map((j) => j.result), refs.map((r) => r.id));
});

Deno.test("completer: a batch is at most maxBatch items", async () => {
  const engine = new FakeEngine();
  const refs = await running(engine, 10);
  const { c } = completer(engine, { maxBatch: 4 });
  await Promise.all(refs.map((r) => c.add({ ...r, result: null })));
  assert.deepEqual(engine.callsOf("complete").map(([items]) => (items as Completion[]).length), [4, 4, 2]);
});

Deno.test("completer: a stale completion resolves false; the others true", async () => {
  const engine = new FakeEngine();
  const [a, b] = await running(engine, 2);
  const { c } = completer(engine);
  const ok = await Promise.all([
    c.add({ ...a, result: 1 }),
    c.add({ id: b.id, lease: b.lease + 1, result: 2 }),
  ]);
  assert.deepEqual(ok, [true, false]);
});

Deno.test("completer: a data error bisects the batch; only the refused item is unstorable", async () => {
  const engine = new FakeEngine();
  const refs = await running(engine, 16);
  const bad = refs[10].id;
  engine.refuse = (c) => c.id === bad ? pgError("22P05", "unsupported Unicode escape sequence") : null;
  const { c, unstorable } = completer(engine);
  const ok = await Promise.all(refs.map((r) => c.add({ ...r, result: null })));
  assert.deepEqual(ok, refs.map((r) => r.id !== bad));
  assert.deepEqual(unstorable, [[bad, "unsupported Unicode escape sequence"]]);
  assert.equal(engine.inState("completed").length, 15);
});

Deno.test("completer: connection errors are retried within the budget, then the batch is written", async () => {
  const engine = new FakeEngine();
  const refs = await running(engine, 3);
  engine.faults.complete = [
    pgError("08006", "connection failure"),
    pgError("57P01", "terminating connection"),
  ];
  const { c } = completer(engine);
  const ok = await Promise.all(refs.map((r) => c.add({ ...r, result: null })));
  assert.deepEqual(ok, [true, true, true]);
  assert.equal(engine.callsOf("complete").length, 3, "two failures, then the write");
});

Deno.test("completer: past the budget a batch is given up (left to rescue); a statement error is not retried", async () => {
  const engine = new FakeEngine();
  const [a, b] = await running(engine, 2);
  const refused = () => Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
  engine.faults.complete = Array.from({ length: 100 }, refused);
  const { c } = completer(engine, { retryBudgetMs: 400 });
  const t0 = Date.now();
  assert.deepEqual(await Promise.all([c.add({ ...a, result: null }), c.add({ ...b, result: null })]), [
    false,
    false,
  ]);
  const tries = engine.callsOf("complete").length;
  assert.ok(tries >= 2, `retried (${tries} tries)`);
  assert.ok(Date.now() - t0 < 2000, "gave up near the budget");
  assert.deepEqual([a, b].map((r) => engine.jobs.get(r.id)!.state), ["running", "running"]);

  engine.faults.complete = [pgError("42P01", 'relation "jobs" does not exist')];
  const before = engine.callsOf("complete").length;
  assert.equal(await c.add({ ...a, result: null }), false);
  assert.equal(engine.callsOf("complete").length - before, 1);
});

/**
 * The dispatcher (`src/worker/dispatcher.ts`) over the in-memory fake engine: slots are never exceeded,
 * a claim never asks for more than the free slots plus the prefetch room, prefetched jobs feed the slots
 * with their starts recorded before their handlers run, and held jobs go back after `prefetchTtl`, at
 * stop and when the queue is paused. No database; each test takes milliseconds.
 */
import assert from "node:assert/strict";
import { FakeEngine, latch, pgError, until } from "../helpers/fake_engine.ts";
import { type FakeRuntime, fakeRuntime } from "../helpers/fake_runtime.ts";
import type { Dispatcher, QueueConfig } from "../../src/worker/dispatcher.ts";
import type { Job } from "../../src/types.ts";
import { ValidationError } from "../../src/errors.ts";
import { toRunner } from "../../src/worker/handlers.ts";
import type { ClaimRequest } from "../../src/storage/engine.ts";

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A handler that takes `ms` and counts how many run at once (`before` runs first, with the job). */
function counted(ms: number, before: (job: Job) => void = () => {}) {
  const c = {
    now: 0,
    most: 0,
    handler: async (job: Job) => {
      before(job);
      c.most = Math.max(c.most, ++c.now);
      await tick(ms);
      c.now--;
    },
  };
  return c;
}

/**
 * Records every claim, and what `check` says is wrong with it when it goes out (a throw in the fake's
 * claim would only fail that claim, which the dispatcher retries: the test asserts the list instead).
 */
function watchClaims(engine: FakeEngine, check: (req: ClaimRequest) => string | null) {
  const w = { claims: [] as ClaimRequest[], wrong: [] as string[] };
  engine.onClaim = (req) => {
    w.claims.push(req);
    const why = check(req);
    if (why) w.wrong.push(why);
  };
  return w;
}

Deno.test("dispatcher: running attempts never exceed maxWorkers and a claim asks only for the free slots", async () => {
  const engine = new FakeEngine();
  engine.add(25);
  const c = counted(2);
  const rt = fakeRuntime(engine, { k: c.handler });
  const d = rt.dispatcher("q", { maxWorkers: 3 });
  const w = watchClaims(
    engine,
    (req) =>
      req.free > d.maxWorkers - d.running
        ? `claim into ${req.free} slots with ${d.running} running`
        : req.limit !== req.free
        ? `no prefetch, yet a limit of ${req.limit} for ${req.free} free slots`
        : null,
  );
  d.start();
  try {
    await until(() => engine.inState("completed").length === 25, "every job completed");
    assert.deepEqual(w.wrong, []);
    assert.equal(c.most, 3);
    assert.ok(w.claims.some((c) => c.free === 3), "a claim filled every slot");
    assert.ok(w.claims.length < 25, `claims took several jobs each: ${w.claims.length} claims`);
  } finally {
    await d.stop();
  }
});

Deno.test("dispatcher: claim loops share the slots; claims in flight reserve theirs", async () => {
  const engine = new FakeEngine();
  engine.add(40);
  engine.delays.claim = 3; // claims overlap
  const c = counted(1);
  const rt = fakeRuntime(engine, { k: c.handler });
  const d = rt.dispatcher("q", { maxWorkers: 4, claimers: 2 });
  const w = watchClaims(engine, (req) => req.free > 2 ? `a loop claimed ${req.free}, over its share` : null);
  d.start();
  try {
    await until(() => engine.inState("completed").length === 40, "every job completed");
    assert.deepEqual(w.wrong, []);
    assert.ok(c.most <= 4, `at most 4 at once, saw ${c.most}`);
  } finally {
    await d.stop();
  }
});

Deno.test("dispatcher: prefetched jobs feed freed slots at once, with nothing written at their start", async () => {
  const engine = new FakeEngine();
  engine.add(6);
  const seen: { id: number; prefetched: boolean }[] = [];
  const c = counted(2, (job) => seen.push({ id: job.id, prefetched: !!job.prefetched }));
  const rt = fakeRuntime(engine, { k: c.handler });
  const d = rt.dispatcher("q", { maxWorkers: 2, prefetch: 4 });
  const w = watchClaims(
    engine,
    (req) => req.limit > req.free + 4 ? `limit ${req.limit} over free ${req.free} + prefetch 4` : null,
  );
  d.start();
  try {
    await until(() => engine.inState("completed").length === 6, "every job completed");
    assert.deepEqual(w.wrong, []);
    assert.deepEqual({ limit: w.claims[0].limit, free: w.claims[0].free }, { limit: 6, free: 2 });
    assert.equal(seen.length, 6);
    assert.equal(seen.filter((s) => s.prefetched).length, 4, "four came from the buffer");
    assert.ok(c.most <= 2, `at most 2 at once, saw ${c.most}`);
    // The attempt was counted at claim: one each, and no statement but claims and completions.
    assert.ok([...engine.jobs.values()].every((j) => j.attempt === 1), "one attempt each");
    const kinds = new Set(engine.calls.map((c) => c.method));
    assert.deepEqual([...kinds].filter((k) => k !== "claim" && k !== "complete" && k !== "queuePaused"), []);
  } finally {
    await d.stop();
  }
});

/** What `withHeld` gives its body. */
interface Held {
  engine: FakeEngine;
  rt: FakeRuntime;
  d: Dispatcher;
  gate: { open: () => void };
  /** Ids of the jobs whose handler ran, in order. */
  ran: number[];
}

/**
 * `n` jobs on one slot: job 1 runs until `gate` opens, and `body` runs once `held` jobs wait in the
 * buffer; the gate is opened and the dispatcher stopped in any case.
 */
async function withHeld(
  n: number,
  held: number,
  cfg: QueueConfig,
  body: (t: Held) => Promise<void>,
  setup: (engine: FakeEngine) => void = () => {},
  pollInterval = 50,
): Promise<void> {
  const engine = new FakeEngine();
  engine.add(n);
  setup(engine);
  const gate = latch();
  const ran: number[] = [];
  const rt = fakeRuntime(engine, {
    k: (job: Job) => {
      ran.push(job.id);
      return job.id === 1 ? gate.promise : undefined;
    },
  }, { pollInterval });
  const d = rt.dispatcher("q", { maxWorkers: 1, ...cfg });
  d.start();
  try {
    await until(() => d.held().length === held, `${held} jobs held`);
    await body({ engine, rt, d, gate, ran });
  } finally {
    gate.open();
    await d.stop();
  }
}

Deno.test("dispatcher: a job held for prefetchTtl goes back without consuming its attempt", async () => {
  let claimedAt = 0;
  await withHeld(3, 2, { prefetch: 2, prefetchTtl: 100 }, async ({ engine, rt, gate }) => {
    await until(() => engine.callsOf("giveBack").length > 0, "a give-back");
    assert.ok(Date.now() - claimedAt >= 95, "not given back before prefetchTtl");
    const [items] = engine.callsOf("giveBack")[0] as [{ id: number }[]];
    assert.deepEqual(items.map((i) => i.id).sort(), [2, 3]);
    await until(() => rt.logger.lines.debug.some((l) => l.includes("waited 100 ms for a slot")), "the log");
    gate.open();
    await until(() => engine.inState("completed").length === 3, "every job completed");
    const attempts = [...engine.jobs.values()].map((j) => j.attempt);
    assert.deepEqual(attempts, [1, 1, 1], "give-backs took no attempt");
  }, (engine) => engine.onClaim = () => claimedAt ||= Date.now());
});

Deno.test("dispatcher: stop gives the held jobs back; the running one finishes", async () => {
  await withHeld(4, 3, { prefetch: 3 }, async ({ engine, rt, d, gate }) => {
    await d.stop();
    assert.deepEqual(d.held(), []);
    assert.deepEqual(engine.inState("available").map((j) => [j.id, j.attempt]), [[2, 0], [3, 0], [4, 0]]);
    assert.ok(rt.logger.lines.debug.some((l) => l.includes("(shutdown)")));
    const claimsAtStop = engine.callsOf("claim").length;
    gate.open();
    await rt.inFlight.get(1)?.done;
    await rt.completer.drain();
    assert.equal(engine.jobs.get(1)!.state, "completed");
    await tick(5);
    assert.equal(engine.callsOf("claim").length, claimsAtStop, "no claim after stop");
  });
});

Deno.test("dispatcher: held jobs go back when the queue is found paused", async () => {
  await withHeld(4, 3, { prefetch: 3 }, async ({ engine, rt, d, gate }) => {
    await engine.pauseQueue("q");
    d.wake(); // as the pause's NOTIFY does
    await until(() => rt.logger.lines.debug.some((l) => l.includes("(queue paused)")), "the give-back");
    assert.deepEqual(d.held(), []);
    assert.deepEqual(engine.inState("available").map((j) => j.id), [2, 3, 4]);
    gate.open();
    await until(() => engine.jobs.get(1)!.state === "completed", "the running job completed");
    await tick(10);
    assert.deepEqual(engine.inState("available").map((j) => j.id), [2, 3, 4], "nothing claimed while paused");
  });
});

Deno.test("dispatcher: a held job cancelled meanwhile may still run, and its outcome changes nothing", async () => {
  await withHeld(2, 1, { prefetch: 1 }, async ({ engine, d, gate }) => {
    await engine.cancel(2);
    gate.open();
    await until(() => engine.jobs.get(1)!.state === "completed" && d.running === 0, "the slot freed");
    assert.equal(engine.jobs.get(2)!.state, "cancelled", "the cancel stands");
  });
});

Deno.test("dispatcher: with jobs held and none left to claim, the loop waits instead of claiming again at once", async () => {
  await withHeld(2, 1, { prefetch: 4 }, async ({ engine, gate }) => {
    const before = engine.callsOf("claim").length;
    await tick(200);
    const claims = engine.callsOf("claim").length - before;
    assert.ok(claims <= 5, `about one claim per poll interval (50 ms) over 200 ms, not ${claims}`);
    gate.open();
    await until(() => engine.inState("completed").length === 2, "both completed");
  });
});

Deno.test("dispatcher: freed slots take held jobs without a pause lookup each; a short refill waits", async () => {
  // 400 instant jobs, 10 slots, 100 held ahead, a poll interval longer than the test: every start batch
  // comes from the buffer. A pause lookup per freed slot (a round trip before each start batch) was the
  // drain's largest cost; a NOTIFY or an empty claim still looks it up.
  const engine = new FakeEngine();
  engine.add(400);
  const rt = fakeRuntime(engine, { k: () => undefined }, { pollInterval: 60_000 });
  const d = rt.dispatcher("q", { maxWorkers: 10, prefetch: 100 });
  d.start();
  try {
    await until(() => engine.inState("completed").length === 400, "every job completed");
    const lookups = engine.callsOf("queuePaused").length;
    assert.ok(lookups <= 2, `pause lookups: ${lookups} (one per start batch was 40 here)`);
    const claims = engine.callsOf("claim").length;
    assert.ok(claims <= 12, `claims: ${claims} (a refill takes about 50 jobs)`);
    // The queue is empty now: freed slots do not claim again; the next claim waits for a NOTIFY.
    const after = engine.callsOf("claim").length;
    await tick(100);
    assert.equal(engine.callsOf("claim").length, after, "no claim without a NOTIFY");
    engine.add(5);
    d.wake(); // as the enqueue's NOTIFY does
    await until(() => engine.inState("completed").length === 405, "the new jobs completed");
  } finally {
    await d.stop();
  }
});

Deno.test("dispatcher: a failed claim is logged and retried", async () => {
  const engine = new FakeEngine();
  engine.add(2);
  engine.faults.claim = [pgError("08006", "connection failure")];
  const rt = fakeRuntime(engine, { k: () => "ok" }, { pollInterval: 5 });
  const d = rt.dispatcher("q", {});
  d.start();
  try {
    await until(() => engine.inState("completed").length === 2, "every job completed");
    assert.ok(rt.logger.lines.error.some((l) => l.includes("claim on queue q failed: connection failure")));
  } finally {
    await d.stop();
  }
});

Deno.test("dispatcher: settings out of range are refused", () => {
  const rt = fakeRuntime(new FakeEngine(), {});
  assert.throws(() => rt.dispatcher("q", { maxWorkers: 0 }), /maxWorkers must be a positive integer/);
  assert.throws(() => rt.dispatcher("q", { claimers: 1.5 }), /claimers must be a positive integer/);
  assert.throws(() => rt.dispatcher("q", { prefetch: 10_001 }), /prefetch must be an integer from 0 to/);
  assert.throws(() => rt.dispatcher("q", { prefetchTtl: 99 }), /prefetchTtl must be at least 100 ms/);
  assert.throws(
    () => rt.dispatcher("q", { maxWorkers: -1 }),
    ValidationError,
    "a ValidationError (SvcError)",
  );
  assert.throws(() => toRunner("k", { handler: () => {}, timeout: 0 }), ValidationError);
});

Deno.test("dispatcher: under a unit limit, returned handlers' attempts are named in the next claims, which have room thanks to them", async () => {
  const engine = new FakeEngine();
  engine.add(30);
  engine.unitLimits.q = 3;
  engine.delays.complete = 40; // outcomes take a while to be written
  const c = counted(2);
  const rt = fakeRuntime(engine, { k: c.handler });
  const d = rt.dispatcher("q", { maxWorkers: 3 });
  // Every attempt a claim names is the job's current one (its outcome may be written meanwhile: the claim reaches
  // the fake a macrotask later); count the claims that had room only thanks to the names.
  let roomFromNames = 0;
  const w = watchClaims(engine, (req) => {
    const running = engine.inState("running").length;
    const namedRunning = (req.ended ?? []).filter((a) => engine.jobs.get(a.id)?.state === "running").length;
    if (req.free > 0 && running >= 3 && running - namedRunning < 3) roomFromNames++;
    for (const a of req.ended ?? []) {
      const j = engine.jobs.get(a.id);
      if (!j || j.lease !== a.lease) return `ended ${a.id}:${a.lease} is not the job's current attempt`;
    }
    return null;
  });
  d.start();
  try {
    await until(() => engine.inState("completed").length === 30, "every job completed");
    assert.deepEqual(w.wrong, []);
    assert.ok(c.most <= 3, `at most 3 at once (got ${c.most})`);
    const named = w.claims.filter((r) => r.ended?.length);
    assert.ok(named.length > 0, "claims named returned attempts whose outcome was unwritten");
    assert.ok(roomFromNames > 0, "some claims had room only because they named returned attempts");
  } finally {
    await d.stop();
  }
});

/**
 * The executor (`src/worker/executor.ts`) over the in-memory fake engine: each way a handler ends is
 * recorded with the attempt's run lease (completed through the completer, retried, failed, snoozed), the
 * deadline and shutdown abort the handler's signal and fail the attempt, a cancelled attempt writes
 * nothing, and the slot is freed once. No database.
 */
import assert from "node:assert/strict";
import { FakeEngine } from "../helpers/fake_engine.ts";
import { fakeRuntime } from "../helpers/fake_runtime.ts";
import { execute } from "../../src/worker/executor.ts";
import { type JobContext, snooze, TerminalError } from "../../mod.ts";
import type { Job } from "../../src/types.ts";
import type { HandlerEntry } from "../../src/worker/handlers.ts";

/** Claims one job of kind `k` (with `fields`) and runs `handler` on it; resolves once its outcome is written. */
async function runOne(
  handler: HandlerEntry,
  fields: Partial<Job> = {},
  abortWith?: "cancelled" | "shutdown",
  /** Whether the slot is free once the outcome is written: not while an aborted handler still runs. */
  freed = true,
) {
  const engine = new FakeEngine();
  engine.add(1, fields);
  const rt = fakeRuntime(engine, { k: handler });
  const [job] = await engine.claim({
    queue: "q",
    limit: 1,
    free: 1,
    runtimeId: "rt",
    policies: {},
    callbackTimeoutsMs: {},
    prefetchTtlMs: 0,
  });
  let settled = 0;
  const f = execute(job, rt.deps, () => settled++);
  if (abortWith) f.abort(abortWith);
  await f.done;
  await rt.completer.drain();
  await new Promise((r) => setTimeout(r, 0)); // the completed event follows the write
  assert.equal(settled, freed ? 1 : 0, freed ? "the slot is freed once" : "the slot stays taken");
  return { engine, rt, job: engine.jobs.get(job.id)! };
}

Deno.test("executor: a returned value completes the attempt through the completer", async () => {
  const { engine, rt, job } = await runOne(() => ({ n: 1 }));
  assert.equal(job.state, "completed");
  assert.deepEqual(job.result, { n: 1 });
  assert.deepEqual(engine.callsOf("complete").length, 1);
  assert.deepEqual(rt.events, [["completed", job.id]]);
});

Deno.test("executor: undefined is stored as null", async () => {
  const { job } = await runOne(() => undefined);
  assert.equal(job.state, "completed");
  assert.equal(job.result, null);
});

Deno.test("executor: a thrown error makes the attempt retryable with its message", async () => {
  const { rt, job } = await runOne(() => {
    throw new Error("boom");
  });
  assert.equal(job.state, "retryable");
  assert.equal(job.errors[0].error, "boom");
  assert.deepEqual(rt.events, [["retried", job.id]]);
});

Deno.test("executor: a TerminalError fails the job for good; the last attempt fails too", async () => {
  const terminal = await runOne(() => {
    throw new TerminalError("no use retrying");
  });
  assert.equal(terminal.job.state, "failed");
  assert.deepEqual(terminal.rt.events, [["failed", terminal.job.id]]);
  const last = await runOne(() => Promise.reject(new Error("again")), { maxAttempts: 1 });
  assert.equal(last.job.state, "failed");
});

Deno.test("executor: an error's own retryDelayMs goes with the failure", async () => {
  const { engine } = await runOne(() => {
    throw Object.assign(new Error("slow down"), { retryDelayMs: 1234 });
  });
  const [[failure]] = engine.callsOf("fail") as [[{ retryDelayMs?: number; terminal: boolean }]];
  assert.equal(failure.retryDelayMs, 1234);
  assert.equal(failure.terminal, false);
});

Deno.test("executor: snooze gives the attempt back for later", async () => {
  const { engine, rt, job } = await runOne(() => snooze(5000));
  assert.equal(job.state, "scheduled");
  assert.deepEqual(engine.callsOf("snooze"), [[job.id, job.lease, 5000]]);
  assert.deepEqual(rt.events, [["snoozed", job.id]]);
});

Deno.test("executor: a result PostgreSQL cannot store fails the attempt for good before any batch", async () => {
  const { engine, job } = await runOne(() => ({ text: "a\u0000b" }));
  assert.equal(job.state, "failed");
  assert.match(job.errors[0].error, /^result cannot be stored/);
  assert.equal(engine.callsOf("complete").length, 0);
});

Deno.test("executor: the deadline aborts the handler's signal with 'deadline' and fails the attempt", async () => {
  let reason: unknown;
  const { job } = await runOne({
    timeout: 20,
    handler: (_job, ctx) =>
      new Promise((resolve) => {
        ctx.signal.addEventListener("abort", () => {
          reason = ctx.signal.reason;
          resolve("late");
        });
      }),
  });
  assert.equal(reason, "deadline");
  assert.equal(job.state, "retryable");
  assert.match(job.errors[0].error, /deadline exceeded: the handler ran longer than its timeout of 20 ms/);
});

Deno.test("executor: shutdown fails the attempt for a retry at once; cancel writes nothing", async () => {
  // A handler that ignores the abort keeps its slot (src/worker/stuck.ts); one that heeds it frees it.
  const forever = () => new Promise(() => {});
  const heeds = (_j: Job, ctx: JobContext) =>
    new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
  const shut = await runOne(forever, {}, "shutdown", false);
  assert.equal(shut.job.state, "retryable");
  assert.equal(shut.job.errors[0].error, "aborted by shutdown");
  const [[failure]] = shut.engine.callsOf("fail") as [[{ retryDelayMs?: number }]];
  assert.equal(failure.retryDelayMs, 0);

  const cancelled = await runOne(forever, {}, "cancelled", false);
  assert.equal(cancelled.job.state, "running", "the canceller already changed the job; the fake does not");
  assert.equal(cancelled.engine.callsOf("fail").length + cancelled.engine.callsOf("complete").length, 0);
  assert.equal((await runOne(heeds, {}, "shutdown")).job.state, "retryable");
  assert.equal((await runOne(heeds, {}, "cancelled")).job.state, "running");
});

Deno.test("executor: a kind without a handler in this worker fails its attempt", async () => {
  const { job } = await runOne(() => "never", { kind: "other" });
  assert.equal(job.state, "retryable");
  assert.match(job.errors[0].error, /no handler registered for kind other/);
});

Deno.test("executor: a stale attempt (lease moved on) changes nothing", async () => {
  const engine = new FakeEngine();
  engine.add(1);
  const rt = fakeRuntime(engine, { k: () => "done" });
  const req = { queue: "q", limit: 1, free: 1, runtimeId: "rt", policies: {}, callbackTimeoutsMs: {} };
  const [job] = await engine.claim({ ...req, prefetchTtlMs: 0 });
  engine.jobs.get(job.id)!.lease++; // rescued and claimed again elsewhere
  await execute(job, rt.deps, () => {}).done;
  await rt.completer.drain();
  assert.equal(engine.jobs.get(job.id)!.state, "running");
  assert.deepEqual(rt.events, []);
});

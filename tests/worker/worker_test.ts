/**
 * The worker (`createWorker`, src/worker/) against PostgreSQL: handler outcomes, backoff, cancel, claim
 * order, scheduling, deadlines, slots, in-process callbacks and their timeouts, shutdown, rescue, schema
 * checks and NOTIFY wake-ups, on the storage engine of the run. (The unit tests of the dispatcher, the
 * executor and the completer without a database are in tests/unit/.)
 */
import { claim } from "../helpers/claim.ts";
import assert from "node:assert/strict";
import { grantWorkerRole, makeDue, staleRuntime, testClient, waitFor } from "../helpers/db.ts";
import { claimsRun, startWorker } from "../helpers/worker.ts";
import { spawnFixture } from "../helpers/process.ts";
import { CallbackEndedError, type Job, type JobContext, snooze, TerminalError } from "../../mod.ts";

const fast = () => 20; // backoff for tests

Deno.test("handler outcomes: result stored, retries with backoff, exhaustion, TerminalError, snooze", async () => {
  const { client, drop } = await testClient();
  const calls = new Map<string, number>();
  const bump = (k: string) => calls.set(k, (calls.get(k) ?? 0) + 1).get(k)!;
  const retried: number[] = [];
  const failed: number[] = [];
  const { stop } = await startWorker(client, {
    handlers: {
      ok: (job) => ({ doubled: (job.args.n as number) * 2 }),
      flaky: {
        handler: () => {
          if (bump("flaky") < 3) throw new Error(`flake ${calls.get("flaky")}`);
          return "done";
        },
        backoff: fast,
      },
      always: {
        handler: () => {
          throw new Error("always fails");
        },
        backoff: fast,
      },
      terminal: () => {
        throw new TerminalError("bad input");
      },
      snoozer: () => (bump("snoozer") === 1 ? snooze(50) : "woke"),
      capped: {
        handler: () => {
          throw new Error("x");
        },
        backoff: fast,
        maxAttempts: 2,
      },
    },
    on: { retried: (j) => retried.push(j.id), failed: (j) => failed.push(j.id) },
  });
  try {
    const ok = await client.enqueue("ok", { n: 21 });
    const flaky = await client.enqueue("flaky", {});
    const always = await client.enqueue("always", {}, { maxAttempts: 3 });
    const terminal = await client.enqueue("terminal", {});
    const snoozer = await client.enqueue("snoozer", {});
    const capped = await client.enqueue("capped", {});
    const state = async (id: number) => (await client.getJob(id))!;
    await waitFor(async () => (await state(ok.id)).state === "completed", 5000, "ok");
    assert.deepEqual((await state(ok.id)).result, { doubled: 42 });

    await waitFor(async () => (await state(flaky.id)).state === "completed", 10000, "flaky");
    const f = await state(flaky.id);
    assert.equal(f.attempt, 3);
    assert.deepEqual(f.errors.map((e) => e.error), ["flake 1", "flake 2"]);
    assert.deepEqual(f.errors.map((e) => e.attempt), [1, 2]);
    assert.equal(f.result, "done");

    await waitFor(async () => (await state(always.id)).state === "failed", 10000, "always");
    const a = await state(always.id);
    assert.equal(a.attempt, 3);
    assert.equal(a.errors.length, 3);
    assert.equal(a.errors[2].terminal, true);
    assert.ok(a.finalizedAt);

    await waitFor(async () => (await state(terminal.id)).state === "failed", 5000, "terminal");
    const t = await state(terminal.id);
    assert.equal(t.attempt, 1);
    assert.equal(t.errors[0].error, "bad input");
    assert.equal(t.errors[0].terminal, true);

    await waitFor(async () => (await state(snoozer.id)).state === "completed", 5000, "snoozer");
    const s = await state(snoozer.id);
    assert.equal(s.attempt, 1, "a snooze gives its attempt back");
    assert.equal(s.errors.length, 0);
    assert.equal(calls.get("snoozer"), 2);

    await waitFor(async () => (await state(capped.id)).state === "failed", 5000, "capped");
    assert.equal((await state(capped.id)).attempt, 2, "per-kind maxAttempts caps the job's 25");

    assert.ok(retried.includes(flaky.id));
    assert.ok(failed.includes(always.id) && failed.includes(terminal.id));
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("default backoff: 2^attempt seconds plus up to 25 % jitter", async () => {
  const { client, drop } = await testClient();
  const { stop } = await startWorker(client, {
    handlers: {
      boom: () => {
        throw new Error("boom");
      },
    },
  });
  try {
    const j = await client.enqueue("boom", {});
    await waitFor(async () => (await client.getJob(j.id))!.state === "retryable", 5000);
    const r = (await client.getJob(j.id))!;
    const delay = r.runAt.getTime() - new Date(r.errors[0].at).getTime();
    assert.ok(delay >= 1900 && delay <= 2600, `delay ${delay} ms for attempt 1`);
  } finally {
    await stop();
    await drop();
  }
});

/** A handler that starts and waits for its abort signal, then resolves with `result`; `seen` records both. */
function waitsForAbort(result: string) {
  const seen = { started: false, reason: null as unknown };
  const handler = (_job: Job, ctx: JobContext) =>
    new Promise((resolve) => {
      seen.started = true;
      ctx.signal.addEventListener("abort", () => {
        seen.reason = ctx.signal.reason;
        resolve(result);
      });
    });
  return { seen, handler };
}

Deno.test("a running attempt the leader rescues (its process's heartbeats stale) has its abort signal fired; its late result changes nothing", async () => {
  const { client, drop } = await testClient();
  const { seen, handler } = waitsForAbort("late");
  // Heartbeats and the worker's own rescue far apart, so that the test decides when the runtime looks dead:
  // staleRuntime ages the heartbeat and the claim by 10 minutes, so the worker's own leader must wait longer
  // than that (with exactly 10 minutes it rescued the attempt itself a few milliseconds later, now and then,
  // and the test's rescue found nothing).
  const { worker, stop } = await startWorker(client, {
    heartbeatInterval: 60_000,
    rescueAfter: 3_600_000,
    handlers: { slow: handler },
  });
  try {
    const j = await client.enqueue("slow", {});
    await waitFor(() => seen.started, 5000, "handler start");
    await staleRuntime(client, worker.id);
    const rescued = await client.engine.rescue(60_000);
    assert.deepEqual(rescued.map((r) => [r.id, r.state]), [[j.id, "retryable"]]);
    await waitFor(() => seen.reason !== null, 5000, "abort signal");
    assert.equal(seen.reason, "cancelled");
    await new Promise((r) => setTimeout(r, 200));
    const after = (await client.getJob(j.id))!;
    assert.equal(after.state, "retryable", "the handler's late result changes nothing");
    assert.match(after.errors[0].error, /rescued: heartbeat stale/);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("cancel of a running job fires its abort signal; cancel/retry state rules", async () => {
  const { client, drop } = await testClient();
  const { seen, handler } = waitsForAbort("ignored");
  const { stop } = await startWorker(client, { handlers: { slow: handler } });
  try {
    const j = await client.enqueue("slow", {});
    await waitFor(() => seen.started, 5000, "handler start");
    const c = await client.cancel(j.id);
    assert.equal(c.state, "cancelled");
    await waitFor(() => seen.reason !== null, 3000, "abort signal");
    assert.equal(seen.reason, "cancelled");
    await new Promise((r) => setTimeout(r, 200));
    const after = (await client.getJob(j.id))!;
    assert.equal(after.state, "cancelled", "the handler's late result changes nothing");
    await assert.rejects(() => client.cancel(j.id), /only a job that has not finished can be cancelled/);
    const fresh = await client.enqueue("other", {}, { queue: "elsewhere" });
    await assert.rejects(
      () => client.retry(fresh.id),
      /only a completed, failed or cancelled job can be retried/,
    );
    await assert.rejects(() => client.retry(999999), /job 999999 not found/);
    const again = await client.retry(j.id);
    assert.equal(again.state, "available");
    assert.equal(again.attempt, 0);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("claim order is priority, then run_at, then id; a paused queue is not claimed", async () => {
  const { client, drop } = await testClient();
  const order: string[] = [];
  await client.pauseQueue("default", { create: true }); // paused ahead of its jobs and its worker
  const { stop } = await startWorker(client, {
    queues: { default: { maxWorkers: 1 } },
    handlers: {
      k: (job) => {
        order.push(job.args.name as string);
      },
    },
  });
  try {
    await client.enqueue("k", { name: "p4" }, { priority: 4 });
    await client.enqueue("k", { name: "p2a" }, { priority: 2 });
    await client.enqueue("k", { name: "p1" }, { priority: 1 });
    await client.enqueue("k", { name: "p2b" }, { priority: 2 });
    await client.enqueue("k", { name: "p3" }, { priority: 3 });
    // Two claim statements after the last enqueue: the worker looked at the queue and took nothing.
    const claims = await claimsRun();
    await waitFor(async () => await claimsRun() >= claims + 2, 10_000, "two claims on the paused queue");
    assert.deepEqual(order, [], "paused queue: nothing claimed");
    assert.equal((await client.listQueues()).find((q) => q.name === "default")?.paused, true);
    await client.resumeQueue("default");
    await waitFor(() => order.length === 5, 5000, "all five");
    assert.deepEqual(order, ["p1", "p2a", "p2b", "p3", "p4"]);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("scheduled jobs run when due and not before", async () => {
  const { client, drop } = await testClient();
  const ranAt = new Map<number, number>();
  const { stop } = await startWorker(client, {
    handlers: {
      later: (job) => {
        ranAt.set(job.id, Date.now());
      },
    },
  });
  try {
    // The client's first statement opens its pool (under load that took more than 800 ms, and a job whose
    // run_at has passed when it is inserted is available, not scheduled): connect first.
    await client.listJobs({ limit: 1 });
    const due = new Date(Date.now() + 2_000);
    const j = await client.enqueue("later", {}, { runAt: due });
    assert.equal(j.state, "scheduled");
    await waitFor(() => ranAt.has(j.id), 10_000, "scheduled job");
    assert.ok(ranAt.get(j.id)! >= due.getTime(), `ran ${due.getTime() - ranAt.get(j.id)!} ms early`);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("hard deadline per kind aborts the attempt and retries it", async () => {
  const { client, drop } = await testClient();
  let aborted: unknown = null;
  const { stop } = await startWorker(client, {
    handlers: {
      hang: {
        handler: (_j: Job, ctx: JobContext) =>
          new Promise(() => ctx.signal.addEventListener("abort", () => (aborted = ctx.signal.reason))),
        timeout: 200,
        backoff: () => 60_000,
      },
    },
  });
  try {
    const j = await client.enqueue("hang", {});
    await waitFor(async () => (await client.getJob(j.id))!.state === "retryable", 5000);
    const r = (await client.getJob(j.id))!;
    assert.match(r.errors[0].error, /deadline exceeded/);
    assert.equal(aborted, "deadline");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("polling fallback: listen: false still picks jobs up", async () => {
  const { client, drop } = await testClient();
  const { stop } = await startWorker(client, { listen: false, handlers: { k: () => "polled" } });
  try {
    const j = await client.enqueue("k", {});
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 5000);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("batch claims never take more jobs than free slots", async () => {
  const { client, drop } = await testClient();
  let running = 0;
  let peak = 0;
  const { stop } = await startWorker(client, {
    queues: { default: { maxWorkers: 3, claimers: 2 } },
    handlers: {
      k: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
      },
    },
  });
  try {
    await client.enqueueMany(Array.from({ length: 30 }, () => ({ kind: "k" })));
    await waitFor(async () => (await client.listQueues())[0].counts.completed === 30, 10000);
    assert.ok(peak <= 3, `peak concurrency ${peak}`);
    const [r] = await client.sql.unsafe(
      `select count(*)::int as n from "${client.schema}".jobs where state = 'running'`,
    );
    assert.equal(r.n, 0);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("in-process callbacks: resumeExternal wakes the waiting handler by notification, not by the poll", async () => {
  const { client, drop } = await testClient();
  let cbId: string | null = null;
  let wokeAt = 0;
  // The waiter's fallback poll is 4 poll intervals (20 s here): a wake within 2 s came from the notification.
  const { stop } = await startWorker(client, {
    pollInterval: 5_000,
    handlers: {
      wait: async (_job: Job, ctx: JobContext) => {
        const id = await ctx.registerCallback({ timeout: 60_000 });
        cbId = id;
        const payload = await ctx.waitForCallback(id);
        wokeAt = Date.now();
        return { got: payload };
      },
    },
  });
  try {
    const j = await client.enqueue("wait", {});
    await waitFor(
      async () => cbId !== null && (await client.getJob(j.id))!.state === "waiting_external",
      5000,
    );
    const parked = (await client.getJob(j.id))!;
    assert.equal(parked.callbackId, cbId);
    const t0 = Date.now();
    const r = await client.resumeExternal(cbId!, { answer: 42 });
    assert.equal(r.state, "running");
    await waitFor(() => wokeAt > 0, 5_000, "handler woken");
    assert.ok(wokeAt - t0 < 10_000, `woke after ${wokeAt - t0} ms (the poll would take 20 s)`);
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 3000);
    assert.deepEqual((await client.getJob(j.id))!.result, { got: { answer: 42 } });
    await assert.rejects(() => client.resumeExternal(cbId!, {}), /no longer pending/);
    await assert.rejects(() => client.resumeExternal(crypto.randomUUID(), {}), /not found/);
    await assert.rejects(() => client.resumeExternal("not-a-uuid", {}), /must be a UUID/);
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("in-process callbacks: resume before the handler waits returns at once", async () => {
  const { client, drop } = await testClient();
  const { stop } = await startWorker(client, {
    handlers: {
      early: async (_job: Job, ctx: JobContext) => {
        const id = await ctx.registerCallback();
        await client.resumeExternal(id, "early bird");
        return await ctx.waitForCallback(id);
      },
    },
  });
  try {
    const j = await client.enqueue("early", {});
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 5000);
    assert.equal((await client.getJob(j.id))!.result, "early bird");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("callback timeout: retryable, then failed when attempts are exhausted", async () => {
  const { client, drop } = await testClient();
  const errors: unknown[] = [];
  const { stop } = await startWorker(client, {
    handlers: {
      never: {
        handler: async (_job: Job, ctx: JobContext) => {
          const id = await ctx.registerCallback({ timeout: 150 });
          try {
            return await ctx.waitForCallback(id);
          } catch (e) {
            errors.push(e);
            throw e;
          }
        },
        backoff: () => 10,
      },
    },
  });
  try {
    const one = await client.enqueue("never", {}, { maxAttempts: 2 });
    await waitFor(async () => (await client.getJob(one.id))!.errors.length >= 1, 5000, "first timeout");
    const first = (await client.getJob(one.id))!;
    assert.equal(first.errors[0].error, "callback timed out");
    await waitFor(async () => (await client.getJob(one.id))!.state === "failed", 8000, "exhausted");
    const last = (await client.getJob(one.id))!;
    assert.equal(last.attempt, 2);
    assert.deepEqual(last.errors.map((e) => e.error), ["callback timed out", "callback timed out"]);
    assert.ok(errors.some((e) => e instanceof CallbackEndedError && /timed out/.test(e.message)));
    const cbs = await client.listCallbacks(one.id);
    assert.deepEqual(cbs.map((c) => c.state), ["expired", "expired"]);
    assert.notEqual(cbs[0].id, cbs[1].id, "a fresh callback per attempt");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("a process whose worker shut down while a handler ran exits when it is done, not at the drain timeout", async () => {
  const { schema, drop } = await testClient();
  const p = spawnFixture("shutdown_exit_worker.ts", schema);
  try {
    await p.waitLine(/^stopped$/, 60_000);
    // The drain timeout is 120 s; a timer left behind by the drain would keep the process that long.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([
      p.status.then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), 30_000)),
    ]);
    clearTimeout(timer);
    assert.ok(exited, "the process was still alive 30 s after its worker stopped");
    assert.equal((await p.status).code, 0);
  } finally {
    await p.kill();
    await drop();
  }
});

Deno.test("graceful shutdown: finishers complete, the rest are aborted and retryable at once", async () => {
  const { client, drop } = await testClient();
  const aborted: unknown[] = [];
  let started = 0;
  // A handler that never returns holds its slot: shutdown waits the stuck grace (0.5 s here) after the drain.
  const { stop } = await startWorker(client, {
    stuckGrace: 500,
    handlers: {
      quick: async () => {
        started++;
        await new Promise((r) => setTimeout(r, 100));
        return "finished";
      },
      stuck: (_j: Job, ctx: JobContext) =>
        new Promise(() => {
          started++;
          ctx.signal.addEventListener("abort", () => aborted.push(ctx.signal.reason));
        }),
    },
  });
  try {
    const q = await client.enqueue("quick", {});
    const s = await client.enqueue("stuck", {});
    await waitFor(() => started === 2, 5000, "both started");
    const t0 = Date.now();
    await stop(400);
    // The drain (0.4 s) and the stuck grace (0.5 s), not the stuck handler: it never returns. A loaded CI
    // machine took over 3 s once, so the bound leaves room; what it guards against would never resolve.
    assert.ok(Date.now() - t0 < 10_000, `stop took ${Date.now() - t0} ms`);
    assert.equal((await client.getJob(q.id))!.state, "completed");
    const st = (await client.getJob(s.id))!;
    // Retryable at once: the leader (still running while the worker drains) may already have promoted it.
    assert.ok(["retryable", "available"].includes(st.state), st.state);
    assert.ok(st.runAt.getTime() <= Date.now());
    assert.equal(st.errors[0].error, "aborted by shutdown");
    assert.deepEqual(aborted, ["shutdown"]);
    const [rt] = await client.sql.unsafe(`select count(*)::int as n from "${client.schema}".runtimes`);
    assert.equal(rt.n, 0, "the runtime row is removed");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("stale attempt: rescue, re-claim, and a late completion with the old lease changes nothing", async () => {
  const { client, drop } = await testClient();
  try {
    await client.enqueue("k", {});
    // A runtime that never heartbeats: with a rescue window of 0 its attempt is stale at once.
    const [first] = await claim(client, "default", 1, "dead-runtime", {});
    await new Promise((r) => setTimeout(r, 5));
    const rescued = await client.engine.rescue(0);
    assert.deepEqual(rescued.map((r) => [r.id, r.state]), [[first.id, "retryable"]]);
    await makeDue(client, first.id);
    assert.equal(await client.engine.promote(), 1);
    const [second] = await claim(client, "default", 1, "live-runtime", {});
    assert.equal(second.id, first.id);
    assert.equal(second.lease, first.lease + 1);
    assert.deepEqual(
      await client.engine.complete([{ id: first.id, lease: first.lease, result: "stale" }], {
        keepCompleted: true,
      }),
      [],
    );
    assert.equal(
      await client.engine.fail({
        id: first.id,
        lease: first.lease,
        error: "x",
        terminal: true,
        retryDelayMs: 0,
      }),
      null,
    );
    assert.equal((await client.getJob(first.id))!.state, "running");
    assert.deepEqual(
      await client.engine.complete([{ id: second.id, lease: second.lease, result: "fresh" }], {
        keepCompleted: true,
      }),
      [second.id],
    );
    const done = (await client.getJob(first.id))!;
    assert.equal(done.state, "completed");
    assert.equal(done.result, "fresh");
    assert.match(done.errors[0].error, /rescued: heartbeat stale/);
  } finally {
    await drop();
  }
});

Deno.test("worker refuses an outdated schema and runs on a newer one", async () => {
  const { client, drop, schema } = await testClient();
  try {
    await client.sql.unsafe(
      `insert into "${schema}".schema_migrations (version, name) values (999, 'future')`,
    );
    const { stop } = await startWorker(client, { handlers: { k: () => 1 } });
    const j = await client.enqueue("k", {});
    await waitFor(async () => (await client.getJob(j.id))!.state === "completed", 5000);
    await stop();
    await client.sql.unsafe(`delete from "${schema}".schema_migrations`);
    await assert.rejects(() => startWorker(client, { handlers: {} }), /run `svc migrate`/);
  } finally {
    await drop();
  }
});

Deno.test("NOTIFY wakes an idle worker at once: client enqueue, transactional enqueue and the SQL function", async () => {
  const { client, drop, schema } = await testClient();
  const seen: number[] = [];
  // A poll interval of a minute: only a notification can wake the claim loop within the test.
  const { stop } = await startWorker(client, {
    pollInterval: 60_000,
    handlers: {
      k: (job) => {
        seen.push(job.id);
      },
    },
  });
  try {
    await new Promise((r) => setTimeout(r, 300)); // the first poll has gone by
    const a = await client.enqueue("k", {});
    await waitFor(() => seen.includes(a.id), 3000, "client enqueue woke the worker");
    const b = await client.transaction((tx) => tx.enqueue("k", {}));
    await waitFor(() => seen.includes(b.id), 3000, "transactional enqueue woke the worker");
    const [row] = await client.sql.unsafe(`select id from "${schema}".enqueue('k', '{}', '{}')`);
    await waitFor(() => seen.includes(Number(row.id)), 3000, "svc.enqueue woke the worker");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("a worker warns at start when maxConnections < sum(claimers) + 5", async () => {
  const { client, drop } = await testClient();
  const warnings: string[] = [];
  const logger = { debug() {}, info() {}, error() {}, warn: (...a: unknown[]) => warnings.push(a.join(" ")) };
  const small = await startWorker(client, {
    maxConnections: 4,
    queues: { a: { claimers: 2 }, b: {} },
    logger,
  });
  await small.stop();
  assert.ok(
    warnings.some((w) => /maxConnections 4 is below the guideline sum\(claimers\) \+ 5 = 8/.test(w)),
    JSON.stringify(warnings),
  );
  warnings.length = 0;
  const enough = await startWorker(client, {
    maxConnections: 8,
    queues: { a: { claimers: 2 }, b: {} },
    logger,
  });
  await enough.stop();
  assert.ok(!warnings.some((w) => /guideline/.test(w)), JSON.stringify(warnings));
  await drop();
});

Deno.test("when LISTEN fails the worker falls back to polling by itself", async () => {
  const { client, drop, schema } = await testClient();
  // A role allowed one connection: the worker's pool takes it, so the LISTEN connection is refused.
  const role = `${schema}_one`;
  await client.sql.unsafe(`create role ${role} login connection limit 1`);
  await grantWorkerRole(client, role);
  const { createWorker } = await import("../../mod.ts");
  const { DATABASE_URL } = await import("../helpers/db.ts");
  const url = new URL(DATABASE_URL);
  url.username = role;
  const warnings: string[] = [];
  const ran: number[] = [];
  const worker = createWorker({
    databaseUrl: url.toString(),
    schema,
    maxConnections: 1,
    queues: { default: { maxWorkers: 1 } },
    pollInterval: 100,
    logger: { debug() {}, info() {}, error() {}, warn: (...a: unknown[]) => warnings.push(a.join(" ")) },
    handlers: {
      k: (job) => {
        ran.push(job.id);
      },
    },
  });
  try {
    await worker.start();
    assert.ok(
      warnings.some((w) => /LISTEN .* failed .*falling back to polling/.test(w)),
      JSON.stringify(warnings),
    );
    const j = await client.enqueue("k", {});
    await waitFor(() => ran.includes(j.id), 5000, "polled job");
  } finally {
    await worker.shutdown(1000);
    await client.sql.unsafe(`drop owned by ${role}`);
    await client.sql.unsafe(`drop role ${role}`);
    await drop();
  }
});

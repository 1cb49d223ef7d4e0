/**
 * A job's limit key (ADR 019, step 1) goes with the job through its whole life, on both engines: enqueue
 * (one, many, in a transaction, the SQL API, REST, the kind's `limitKey(args)`), the claim, completion,
 * failure and retry, snooze, promotion, a give-back, a park for a callback and its resolution, rescue,
 * cancel and retry from history; on queue storage also the prune's forwarding, a long attempt moved out of
 * the ring, and the adoption of canonical jobs by the storage transition. Nothing is enforced by it yet.
 */
import assert from "node:assert/strict";
import { type Client, createClient } from "../../src/client/client.ts";
import { ValidationError } from "../../src/errors.ts";
import type { Job } from "../../src/types.ts";
import {
  canonicalDb,
  countJobs,
  DATABASE_URL,
  engineTest,
  liveRuntimeBoth,
  makeDue,
  staleRuntime,
  withSchema,
} from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";
import { withApi } from "../helpers/admin.ts";
import { startWorker } from "../helpers/worker.ts";

/** The job as stored now (it must exist). */
async function stored(client: Client, id: number): Promise<Job> {
  const job = await client.getJob(id);
  assert.ok(job, `job ${id} exists`);
  return job;
}

/** Claims the one available job of `queue` (it must be there) for `runtime`. */
async function claimOne(client: Client, queue: string, runtime = "rt-1", free = 1): Promise<Job> {
  const jobs = await client.engine.claim({
    queue,
    limit: 1,
    free,
    runtimeId: runtime,
    policies: {},
    callbackTimeoutsMs: {},
    prefetchTtlMs: 60_000,
  });
  assert.equal(jobs.length, 1, `one job of ${queue} claimed`);
  return jobs[0];
}

/**
 * Enqueues a job of `queue` with `limitKey`, claims it and parks it for an HTTP callback (waiting_external),
 * as an HTTP worker does after its function answered.
 */
async function parkedForCallback(
  client: Client,
  queue: string,
  limitKey: string,
): Promise<{ job: Job; callbackId: string }> {
  await client.enqueue("fn", {}, { queue, limitKey });
  const job = await claimOne(client, queue);
  const callbackId = await client.engine.registerCallback({
    id: job.id,
    lease: job.lease,
    timeoutMs: 60_000,
    kind: "http",
  });
  assert.ok(callbackId);
  assert.equal(await client.engine.park({ id: job.id, lease: job.lease, callbackId }), true);
  const waiting = await stored(client, job.id);
  assert.deepEqual([waiting.state, waiting.limitKey], ["waiting_external", limitKey]);
  return { job, callbackId };
}

/** Makes a scheduled or retryable job due and promotes it. */
async function promoteNow(client: Client, id: number): Promise<void> {
  await makeDue(client, id);
  await client.engine.promote();
}

Deno.test("limitKey: enqueue, enqueueMany, a transaction and the SQL API store it; without one it is null", () =>
  withSchema(async (client, schema) => {
    const one = await client.enqueue("charge", { n: 1 }, { limitKey: "acct-1" });
    assert.equal(one.limitKey, "acct-1");
    assert.equal((await stored(client, one.id)).limitKey, "acct-1");

    const none = await client.enqueue("charge", { n: 2 });
    assert.equal(none.limitKey, null);
    assert.equal((await stored(client, none.id)).limitKey, null);

    const many = await client.enqueueMany([
      { kind: "charge", args: { n: 3 }, limitKey: "acct-2" },
      { kind: "charge", args: { n: 4 } },
      { kind: "charge", args: { n: 5 }, limitKey: "acct-2", runAt: new Date(Date.now() + 3_600_000) },
    ]);
    assert.deepEqual(many.map((j) => j.limitKey), ["acct-2", null, "acct-2"]);
    assert.equal(many[2].state, "scheduled");
    for (const j of many) assert.equal((await stored(client, j.id)).limitKey, j.limitKey);

    const inTx = await client.transaction((tx) => tx.enqueue("charge", { n: 6 }, { limitKey: "acct-3" }));
    assert.equal((await stored(client, inTx.id)).limitKey, "acct-3");

    // 255 characters, counted as the database counts them (an astral character is one).
    const long = "🔑".repeat(255);
    assert.equal((await client.enqueue("charge", {}, { limitKey: long })).limitKey, long);

    const [sqlRow] = await client.sql.unsafe(
      `select * from "${schema}".enqueue('charge', '{"n": 7}', '{"limit_key": "acct-4", "queue": "sql"}')`,
    );
    assert.equal(sqlRow.limit_key, "acct-4");
    assert.equal((await stored(client, Number(sqlRow.id))).limitKey, "acct-4");
    const [sqlNull] = await client.sql.unsafe(
      `select * from "${schema}".enqueue('charge', '{}', '{"limit_key": null}')`,
    );
    assert.equal(sqlNull.limit_key, null);
    const [viaJson] = await client.sql.unsafe(`select "${schema}".get_job($1) as j`, [Number(sqlRow.id)]);
    assert.equal(viaJson.j.limit_key, "acct-4");

    const page = await client.listJobs({ kind: "charge", limit: 100 });
    const byId = new Map(page.jobs.map((j) => [j.id, j.limitKey]));
    assert.equal(byId.get(one.id), "acct-1");
    assert.equal(byId.get(none.id), null);
    assert.equal(byId.get(many[2].id), "acct-2");
  }));

Deno.test("limitKey: the kind's limitKey(args) gives it when the enqueue gives none", () =>
  withSchema(
    async (client) => {
      const derived = await client.enqueue("charge", { account: "a7", cents: 5 });
      assert.equal(derived.limitKey, "a7");
      assert.equal((await stored(client, derived.id)).limitKey, "a7");
      const explicit = await client.enqueue("charge", { account: "a7" }, { limitKey: "mine" });
      assert.equal((await stored(client, explicit.id)).limitKey, "mine");
      const undefinedKey = await client.enqueue("maybe", { account: "a7" });
      assert.equal((await stored(client, undefinedKey.id)).limitKey, null);
      assert.equal((await client.enqueue("nullish", {})).limitKey, null);
      const otherKind = await client.enqueue("other", { account: "a7" });
      assert.equal((await stored(client, otherKind.id)).limitKey, null);
      const many = await client.enqueueMany([
        { kind: "charge", args: { account: "b1" } },
        { kind: "charge", args: { account: "b2" }, limitKey: "given" },
        { kind: "other", args: { account: "b3" } },
      ]);
      assert.deepEqual(many.map((j) => j.limitKey), ["b1", "given", null]);
      for (const j of many) assert.equal((await stored(client, j.id)).limitKey, j.limitKey);

      // What the function answers is checked like the option; nothing is written.
      const before = await countJobs(client);
      await assert.rejects(
        client.enqueue("charge", { account: "" }),
        (e: Error) =>
          e instanceof ValidationError &&
          /^kinds\.charge\.limitKey\(args\) must be a string of 1 to 255 characters, got 0 characters/.test(
            e.message,
          ),
      );
      await assert.rejects(
        client.enqueueMany([{ kind: "other" }, { kind: "charge", args: { account: 42 } }]),
        /kinds\.charge\.limitKey\(args\) must be a string of 1 to 255 characters, got number/,
      );
      assert.equal(await countJobs(client), before);

      // ctx.enqueue of a worker that shares the client derives it too.
      const seen: (string | null)[] = [];
      const { stop } = await startWorker(client, {
        queues: { derive: { maxWorkers: 1 } },
        handlers: {
          parent: async (_job, ctx) => {
            await ctx.enqueue("charge", { account: "c1" }, { queue: "derive" });
          },
          charge: (job) => {
            seen.push(job.limitKey);
          },
        },
      });
      try {
        await client.enqueue("parent", {}, { queue: "derive" });
        const until = Date.now() + 10_000;
        while (seen.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        assert.deepEqual(seen, ["c1"]);
      } finally {
        await stop();
      }
    },
    {
      kinds: {
        charge: { limitKey: (args: Record<string, unknown>) => args.account as string },
        maybe: { limitKey: () => undefined },
        // A JavaScript caller's null is no key as well.
        nullish: { limitKey: () => null as unknown as undefined },
      },
    },
  ));

Deno.test("limitKey: the client's kinds option is checked", () => {
  const bad: [unknown, RegExp][] = [
    [[], /kinds must be an object/],
    [{ charge: "x" }, /kinds\.charge must be an object/],
    [{ charge: { limitKey: "acct" } }, /kinds\.charge\.limitKey must be a function/],
    [{ charge: { limitKye: () => "k" } }, /kinds\.charge: unknown option limitKye/],
  ];
  for (const [kinds, re] of bad) {
    assert.throws(
      () => createClient({ databaseUrl: DATABASE_URL, kinds: kinds as never }),
      (e: Error) => e instanceof ValidationError && re.test(e.message),
      String(re),
    );
  }
});

Deno.test("limitKey: an empty, too long or non-string key is refused and nothing is written", () =>
  withSchema(async (client, schema) => {
    const bad: [unknown, RegExp][] = [
      ["", /^limitKey must be a string of 1 to 255 characters, got 0 characters$/],
      ["k".repeat(256), /^limitKey must be a string of 1 to 255 characters, got 256 characters$/],
      ["🔑".repeat(256), /got 256 characters$/],
      [42, /^limitKey must be a string of 1 to 255 characters, got number$/],
      [{ id: 1 }, /got object$/],
      ["a\u0000b", /^limitKey contains U\+0000/],
    ];
    for (const [key, re] of bad) {
      await assert.rejects(
        client.enqueue("k", {}, { limitKey: key as string }),
        (e: Error) => e instanceof ValidationError && re.test(e.message),
        String(re),
      );
      await assert.rejects(
        client.enqueueMany([{ kind: "fine" }, { kind: "k", limitKey: key as string }]),
        (e: Error) => e instanceof ValidationError && re.test(e.message),
      );
    }
    assert.equal(await countJobs(client), 0);
    // The SQL API checks it too (SQLSTATE 22023); JSON null is no key.
    for (const opts of ['{"limit_key": ""}', `{"limit_key": "${"k".repeat(256)}"}`, '{"limit_key": 7}']) {
      await assert.rejects(
        client.sql.unsafe(`select * from "${schema}".enqueue('k', '{}', $1::text::jsonb)`, [opts]),
        (e: Error & { code?: string }) =>
          e.code === "22023" &&
          /svc\.enqueue: limit_key must be a string of 1 to 255 characters/.test(e.message),
        opts,
      );
    }
    assert.equal(await countJobs(client), 0);
  }));

Deno.test("limitKey: a claimed job carries it, and so does the job its completion leaves", () =>
  withSchema(async (client) => {
    const job = await client.enqueue("k", {}, { limitKey: "acct-1", queue: "lk" });
    const [claimed] = await claim(client, "lk", 10, "rt-1");
    assert.equal(claimed.id, job.id);
    assert.equal(claimed.limitKey, "acct-1");
    const running = await stored(client, job.id);
    assert.deepEqual([running.state, running.limitKey], ["running", "acct-1"]);
    assert.equal((await client.runningJobs()).find((j) => j.id === job.id)?.limitKey, "acct-1");
    assert.deepEqual(
      await client.engine.complete([{ id: job.id, lease: claimed.lease, result: { ok: true } }], {
        keepCompleted: true,
      }),
      [job.id],
    );
    const done = await stored(client, job.id);
    assert.deepEqual([done.state, done.limitKey], ["completed", "acct-1"]);
  }));

Deno.test("limitKey: kept by a failure, the retryable job, its promotion and next attempt, and a retry from history", () =>
  withSchema(async (client) => {
    const job = await client.enqueue("k", {}, { limitKey: "acct-1", queue: "lk", maxAttempts: 2 });
    const first = await claimOne(client, "lk");
    const failed = await client.engine.fail({
      id: job.id,
      lease: first.lease,
      error: "boom",
      terminal: false,
      retryDelayMs: 60_000,
    });
    assert.equal(failed?.limitKey, "acct-1");
    const retryable = await stored(client, job.id);
    assert.deepEqual([retryable.state, retryable.limitKey], ["retryable", "acct-1"]);
    await promoteNow(client, job.id);
    assert.deepEqual([(await stored(client, job.id)).state, (await stored(client, job.id)).limitKey], [
      "available",
      "acct-1",
    ]);
    const second = await claimOne(client, "lk");
    assert.deepEqual([second.id, second.attempt, second.limitKey], [job.id, 2, "acct-1"]);
    await client.engine.fail({ id: job.id, lease: second.lease, error: "boom again", terminal: false });
    const dead = await stored(client, job.id);
    assert.deepEqual([dead.state, dead.limitKey], ["failed", "acct-1"]);
    const again = await client.retry(job.id);
    assert.deepEqual([again.state, again.limitKey], ["available", "acct-1"]);
    assert.equal((await claimOne(client, "lk")).limitKey, "acct-1");
  }));

Deno.test("limitKey: kept by a snooze, a scheduled job's promotion and a held job given back", () =>
  withSchema(async (client) => {
    const job = await client.enqueue("k", {}, { limitKey: "acct-1", queue: "lk" });
    const claimed = await claimOne(client, "lk");
    assert.equal(await client.engine.snooze({ id: job.id, lease: claimed.lease, delayMs: 60_000 }), true);
    const snoozed = await stored(client, job.id);
    assert.deepEqual([snoozed.state, snoozed.limitKey], ["scheduled", "acct-1"]);
    await promoteNow(client, job.id);
    assert.equal((await claimOne(client, "lk")).limitKey, "acct-1");

    const later = await client.enqueue("k", {}, {
      limitKey: "acct-2",
      queue: "lk2",
      runAt: new Date(Date.now() + 3_600_000),
    });
    assert.deepEqual([(await stored(client, later.id)).state, (await stored(client, later.id)).limitKey], [
      "scheduled",
      "acct-2",
    ]);
    await promoteNow(client, later.id);
    const due = await stored(client, later.id);
    assert.deepEqual([due.state, due.limitKey], ["available", "acct-2"]);
    const held = await claimOne(client, "lk2", "rt-1", 0);
    assert.equal(held.prefetched, true);
    assert.deepEqual(await client.engine.giveBack([{ id: held.id, lease: held.lease }]), [held.id]);
    const back = await stored(client, later.id);
    assert.deepEqual([back.state, back.limitKey], ["available", "acct-2"]);
    assert.equal((await claimOne(client, "lk2")).limitKey, "acct-2");
  }));

Deno.test("limitKey: kept while parked for a callback, and after a resume, a complete or a fail", () =>
  withSchema(async (client) => {
    const a = await parkedForCallback(client, "resumed", "key-resumed");
    assert.equal((await client.engine.resolveCallback(a.callbackId, "resume", { payload: 1 })).outcome, "ok");
    const resumed = await stored(client, a.job.id);
    assert.deepEqual([resumed.state, resumed.limitKey], ["running", "key-resumed"]);
    assert.deepEqual(
      await client.engine.complete([{ id: a.job.id, lease: a.job.lease, result: 2 }], {
        keepCompleted: true,
      }),
      [a.job.id],
    );
    const done = await stored(client, a.job.id);
    assert.deepEqual([done.state, done.limitKey], ["completed", "key-resumed"]);

    const b = await parkedForCallback(client, "completed", "key-completed");
    assert.equal(
      (await client.engine.resolveCallback(b.callbackId, "complete", { payload: 3 })).outcome,
      "ok",
    );
    const completed = await stored(client, b.job.id);
    assert.deepEqual([completed.state, completed.limitKey], ["completed", "key-completed"]);

    const c = await parkedForCallback(client, "failed", "key-failed");
    assert.equal(
      (await client.engine.resolveCallback(c.callbackId, "fail", { error: "no", retryable: true })).outcome,
      "ok",
    );
    const retryable = await stored(client, c.job.id);
    assert.deepEqual([retryable.state, retryable.limitKey], ["retryable", "key-failed"]);
  }));

Deno.test("limitKey: kept by the rescue of a crashed attempt and by the next attempt", () =>
  withSchema(async (client) => {
    const job = await client.enqueue("k", {}, { limitKey: "acct-1", queue: "lk" });
    await claimOne(client, "lk", "gone-runtime");
    await staleRuntime(client, "gone-runtime");
    const rescued = await client.engine.rescue(1_000);
    assert.deepEqual(rescued.map((r) => r.id), [job.id]);
    const after = await stored(client, job.id);
    assert.deepEqual([after.state, after.limitKey], ["retryable", "acct-1"]);
    await promoteNow(client, job.id);
    const next = await claimOne(client, "lk");
    assert.deepEqual([next.id, next.attempt, next.limitKey], [job.id, 2, "acct-1"]);
  }));

Deno.test("limitKey: kept by a cancel wherever the job is (available, scheduled, running, bulk)", () =>
  withSchema(async (client) => {
    const available = await client.enqueue("k", {}, { limitKey: "a", queue: "c1" });
    const scheduled = await client.enqueue("k", {}, {
      limitKey: "s",
      queue: "c2",
      runAt: new Date(Date.now() + 3_600_000),
    });
    const running = await client.enqueue("k", {}, { limitKey: "r", queue: "c3" });
    await claimOne(client, "c3");
    for (const [job, key] of [[available, "a"], [scheduled, "s"], [running, "r"]] as const) {
      const cancelled = await client.cancel(job.id);
      assert.deepEqual([cancelled.state, cancelled.limitKey], ["cancelled", key]);
      assert.equal((await stored(client, job.id)).limitKey, key);
    }
    const bulk = await client.enqueueMany([
      { kind: "b", queue: "c4", limitKey: "b1" },
      { kind: "b", queue: "c4", limitKey: "b2", runAt: new Date(Date.now() + 3_600_000) },
    ]);
    assert.equal(await client.bulkCancel({ queue: "c4" }), 2);
    for (const j of bulk) {
      const after = await stored(client, j.id);
      assert.deepEqual([after.state, after.limitKey], ["cancelled", j.limitKey]);
    }
    assert.equal(await client.bulkRetry({ queue: "c4" }), 2);
    for (const j of bulk) assert.equal((await stored(client, j.id)).limitKey, j.limitKey);
  }));

Deno.test("limitKey: a worker's handler gets it on every attempt", () =>
  withSchema(async (client) => {
    const seen: [number, string | null][] = [];
    const { stop } = await startWorker(client, {
      queues: { lk: { maxWorkers: 2 } },
      handlers: {
        flaky: {
          handler: (job) => {
            seen.push([job.attempt, job.limitKey]);
            if (job.attempt === 1) throw new Error("first attempt fails");
            return "ok";
          },
          backoff: () => 0,
        },
      },
    });
    try {
      const job = await client.enqueue("flaky", {}, { queue: "lk", limitKey: "tenant-9" });
      const until = Date.now() + 15_000;
      while ((await stored(client, job.id)).state !== "completed" && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const done = await stored(client, job.id);
      assert.deepEqual([done.state, done.limitKey], ["completed", "tenant-9"]);
      assert.deepEqual(seen, [[1, "tenant-9"], [2, "tenant-9"]]);
    } finally {
      await stop();
    }
  }));

Deno.test("limitKey: the admin REST API takes limit_key and shows it in the job JSON", () =>
  withApi(async ({ call }) => {
    const a = await call("POST", "/api/jobs", { kind: "email", args: {}, limit_key: "acct-42" });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(a.body.job.limit_key, "acct-42");
    const b = await call("POST", "/api/jobs", { kind: "email", args: {} });
    assert.equal(b.body.job.limit_key, null);
    const got = await call("GET", `/api/jobs/${a.body.job.id}`);
    assert.equal(got.body.job.limit_key, "acct-42");
    const list = await call("GET", "/api/jobs?kind=email");
    assert.deepEqual(
      list.body.jobs.map((j: { id: number; limit_key: string | null }) => [j.id, j.limit_key]),
      [[b.body.job.id, null], [a.body.job.id, "acct-42"]],
    );
    const cancelled = await call("POST", `/api/jobs/${a.body.job.id}/cancel`);
    assert.equal(cancelled.body.job.limit_key, "acct-42");
    for (const bad of ["", "k".repeat(256), 5]) {
      const r = await call("POST", "/api/jobs", { kind: "email", limit_key: bad });
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(r.body.code, "invalid_request");
    }
  }));

engineTest(
  "queue_storage",
  "limitKey: kept by the prune's forwarding of unclaimed rows and by a long attempt moved out of the ring",
  () =>
    withSchema(async (client, schema, sql) => {
      const qs = `"${schema}_qs"`;
      const forwarded = await client.enqueue("k", {}, { limitKey: "fwd", queue: "f" });
      const long = await client.enqueue("k", {}, { limitKey: "long", queue: "l" });
      const [{ s: s0 }] = await sql.unsafe(`select ${qs}.current_slot() as s`);
      const claimed = await claimOne(client, "l");
      await sql.unsafe(`select ${qs}.rotate(0)`);
      await sql.unsafe(`select ${qs}.sync_position()`);
      // The long attempt leaves the ring (a parked row, running), then the slot's unclaimed row moves on.
      assert.equal(Number((await sql.unsafe(`select ${qs}.move_long_attempts($1, 0) as n`, [s0]))[0].n), 1);
      const moved = await stored(client, long.id);
      assert.deepEqual([moved.state, moved.limitKey], ["running", "long"]);
      assert.equal((await sql.unsafe(`select ${qs}.prune($1, 0, true, 0) as o`, [s0]))[0].o, "pruned");
      const [row] = await sql.unsafe(`select slot, limit_key from ${qs}.ready where job_id = $1`, [
        forwarded.id,
      ]);
      assert.notEqual(Number(row.slot), Number(s0));
      assert.equal(row.limit_key, "fwd");
      assert.equal((await claimOne(client, "f")).limitKey, "fwd");
      assert.deepEqual(
        await client.engine.complete([{ id: long.id, lease: claimed.lease, result: null }], {
          keepCompleted: true,
        }),
        [long.id],
      );
      const done = await stored(client, long.id);
      assert.deepEqual([done.state, done.limitKey], ["completed", "long"]);
    }),
);

engineTest(
  "queue_storage",
  "limitKey: the storage transition's adoption of canonical jobs keeps it",
  () =>
    canonicalDb(async (client, schema) => {
      const available = await client.enqueue("k", {}, { limitKey: "avail", queue: "a" });
      const scheduled = await client.enqueue("k", {}, {
        limitKey: "sched",
        queue: "s",
        runAt: new Date(Date.now() + 3_600_000),
      });
      const retryable = await client.enqueue("k", {}, { limitKey: "retry", queue: "r" });
      const r = await claimOne(client, "r");
      await client.engine.fail({
        id: retryable.id,
        lease: r.lease,
        error: "x",
        terminal: false,
        retryDelayMs: 60_000,
      });
      const { job: waiting, callbackId } = await parkedForCallback(client, "w", "wait");
      const finished = await client.enqueue("k", {}, { limitKey: "done", queue: "d" });
      const d = await claimOne(client, "d");
      await client.engine.complete([{ id: finished.id, lease: d.lease, result: null }], {
        keepCompleted: true,
      });

      // Into mixed_transition, with a live runtime that runs queue storage.
      await liveRuntimeBoth(client, "new:1");
      for (const step of ["prepare", "enter-mixed-transition"] as const) {
        const s = await client.storageStep(step);
        assert.equal(s.outcome, "changed", `${step}: ${s.message}`);
      }
      // The leader's adoption (scheduled, retryable, the parked HTTP attempt), then the available job.
      assert.equal(Number((await client.sql.unsafe(`select "${schema}_qs".adopt_waiting() as n`))[0].n), 3);
      assert.equal(
        Number(
          (await client.sql.unsafe(`select "${schema}_qs".adopt($1::bigint[]) as n`, [[available.id]]))[0].n,
        ),
        1,
      );
      // An older producer's own insert into canonical's table moves at once; a retried finished job too.
      const [direct] = await client.sql.unsafe(
        `insert into "${schema}".jobs (kind, queue, limit_key) values ('k', 'o', 'direct') returning id`,
      );
      const again = await client.retry(finished.id);
      assert.equal(again.limitKey, "done");
      assert.equal(
        Number(
          (await client.sql.unsafe(`select count(*) as n from "${schema}".jobs where state <> 'completed'`))[
            0
          ].n,
        ),
        0,
        "nothing unfinished left in canonical",
      );
      const qsIds = new Set(
        (await client.sql.unsafe(`select id from "${schema}_qs".jobs`)).map((x) => Number(x.id)),
      );
      const expect: [number, string, string][] = [
        [available.id, "avail", "available"],
        [scheduled.id, "sched", "scheduled"],
        [retryable.id, "retry", "retryable"],
        [waiting.id, "wait", "waiting_external"],
        [Number(direct.id), "direct", "available"],
        [finished.id, "done", "available"],
      ];
      for (const [id, key, state] of expect) {
        assert.ok(qsIds.has(id), `job ${id} (${key}) is in queue storage`);
        const job = await stored(client, id);
        assert.deepEqual([job.state, job.limitKey], [state, key], `job ${id}`);
      }
      // Adopted jobs go on: the available one is claimed with its key, the parked one completes with it.
      assert.equal((await claimOne(client, "a")).limitKey, "avail");
      assert.equal(
        (await client.engine.resolveCallback(callbackId, "complete", { payload: 1 })).outcome,
        "ok",
      );
      const completed = await stored(client, waiting.id);
      assert.deepEqual([completed.state, completed.limitKey], ["completed", "wait"]);
    }),
);

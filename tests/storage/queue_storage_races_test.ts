/**
 * Queue storage's races and failures (docs/reference/storage.md): a prune killed before it commits, a
 * claim whose worker never saw its rows, a late writer into a slot being pruned, long transactions that
 * do or do not read the queue-storage tables, producer ordering across lane shards, two leaders at once,
 * cancel racing a claim, callbacks before and after a park, and slots pinned by a paused backlog or a
 * long job. Each test drives the SQL functions through several connections and checks rows directly.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import type { Client } from "../../src/client/client.ts";
import { ageClaims, DATABASE_URL, engineTest, waitFor, withSchema } from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";

type Sql = postgres.Sql;

const qs = (schema: string) => `"${schema}_qs"`;

async function currentSlot(sql: Sql, schema: string): Promise<number> {
  const [r] = await sql.unsafe(`select ${qs(schema)}.current_slot() as s`);
  return Number(r.s);
}

/** Starts a new ring generation now (whatever the interval); returns the new slot. */
async function rotate(sql: Sql, schema: string): Promise<number> {
  const [r] = await sql.unsafe(`select ${qs(schema)}.rotate(0) as s`);
  assert.notEqual(r.s, null, "rotated");
  // Producers move to the new slot once the leader syncs the ring's position (maintainRing does).
  await sql.unsafe(`select ${qs(schema)}.sync_position()`);
  return Number(r.s);
}

async function prune(sql: Sql, schema: string, slot: number, forward = false, keepMs = 0): Promise<string> {
  const [r] = await sql.unsafe(`select ${qs(schema)}.prune($1, 0, $2, $3) as o`, [slot, forward, keepMs]);
  return r.o;
}

async function slotRows(sql: Sql, schema: string, slot: number): Promise<number> {
  const [r] = await sql.unsafe(
    `select (select count(*) from ${qs(schema)}.ready where slot = $1)
          + (select count(*) from ${qs(schema)}.claims where slot = $1)
          + (select count(*) from ${qs(schema)}.completions where slot = $1)
          + (select count(*) from ${qs(schema)}.skipped where slot = $1)
          + (select count(*) from ${qs(schema)}.closed where slot = $1) as n`,
    [slot],
  );
  return Number(r.n);
}

/** Runs jobs to completion through the engine (claimed as `runtime`, completed with their id). */
async function runAll(client: Client, queue = "default", runtime = "rt"): Promise<number[]> {
  const done: number[] = [];
  for (;;) {
    const jobs = await claim(client, queue, 100, runtime);
    if (jobs.length === 0) return done;
    done.push(
      ...await client.engine.complete(jobs.map((j) => ({ id: j.id, lease: j.lease, result: j.id })), {
        keepCompleted: true,
      }),
    );
  }
}

function lockKey(schema: string, queue: string, priority: number, shard: number): string {
  return `hashtextextended('${schema}_qs:lane:${queue}:${priority}:${shard}', 0)`;
}

engineTest(
  "queue_storage",
  "a prune whose session dies before COMMIT truncates nothing",
  () =>
    withSchema(async (client, schema, sql) => {
      const jobs = await client.enqueueMany(Array.from({ length: 5 }, () => ({ kind: "k" })));
      const s0 = await currentSlot(sql, schema);
      await rotate(sql, schema);
      assert.equal((await runAll(client)).length, 5);
      const before = await slotRows(sql, schema, s0);
      assert.ok(before > 0);
      // A leader process truncates slot s0 in a transaction and is killed (-9) before it commits.
      const leader = new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `import postgres from "postgres";
         const sql = postgres(${JSON.stringify(DATABASE_URL)}, { max: 1 });
         await sql.unsafe("begin");
         const [r] = await sql.unsafe("select ${
            qs(schema).replaceAll('"', '\\"')
          }.prune(${s0}::smallint, 0, false, 0) as o");
         console.log(r.o);
         await new Promise(() => {});`,
        ],
        cwd: new URL("../..", import.meta.url).pathname,
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      const reader = leader.stdout.pipeThrough(new TextDecoderStream()).getReader();
      const { value } = await reader.read();
      assert.equal(value?.trim(), "pruned");
      leader.kill("SIGKILL");
      await leader.status;
      reader.releaseLock();
      await leader.stdout.cancel().catch(() => {});
      // The server notices the dead client and rolls its transaction back.
      await waitFor(
        async () => {
          const [r] = await sql.unsafe(
            `select count(*) as n from pg_stat_activity where query like '%.prune(${s0}::smallint, 0, false, 0)%' and pid <> pg_backend_pid()`,
          );
          return Number(r.n) === 0;
        },
        10_000,
        "the killed leader's session to end",
      );
      assert.equal(await slotRows(sql, schema, s0), before, "rolled back: nothing truncated");
      for (const j of jobs) assert.equal((await client.getJob(j.id))!.state, "completed");
      assert.equal(await prune(sql, schema, s0), "pruned");
      assert.equal(await slotRows(sql, schema, s0), 0);
      // The completed retention (0 here) has passed: the completed jobs expire with their slot.
      for (const j of jobs) assert.equal(await client.getJob(j.id), null);
    }),
);

engineTest(
  "queue_storage",
  "a claim committed for a worker that never saw its rows is rescued and runs again",
  () =>
    withSchema(async (client) => {
      const job = await client.enqueue("k", {});
      // The claim commits, but its worker is gone before it reads the rows (it has no runtimes row).
      assert.equal((await claim(client, "default", 1, "vanished"))[0].id, job.id);
      assert.equal((await client.getJob(job.id))!.state, "running");
      await ageClaims(client, "vanished"); // a batch claimed within rescueAfter is left alone
      const rescued = await client.engine.rescue(60_000);
      assert.deepEqual(rescued.map((r) => [r.id, r.state]), [[job.id, "retryable"]]);
      assert.match((await client.getJob(job.id))!.errors[0].error, /heartbeat stale/);
    }),
);

engineTest(
  "queue_storage",
  "closers racing: a completion from a REPEATABLE READ transaction whose snapshot predates a rescue never wins too",
  () =>
    withSchema(async (client, schema, sql) => {
      const [job] = await client.enqueueMany([{ kind: "k" }]);
      const [got] = await claim(client, "default", 1, "vanished");
      assert.equal(got.id, job.id);
      await ageClaims(client, "vanished");
      const slot = await currentSlot(sql, schema);
      const rr = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        // The caller's transaction takes its snapshot, then the rescue closes the attempt and commits.
        const outcome = rr.begin("isolation level repeatable read", async (tx) => {
          await tx.unsafe(`select count(*) from ${qs(schema)}.ready`);
          await client.engine.rescue(60_000);
          const items = [{ id: got.id, lease: got.lease, slot, result: "late" }];
          return await tx.unsafe(
            `select ${qs(schema)}.complete($1::text::jsonb, true) as id`,
            [
              JSON.stringify(items),
            ],
          );
        }).then((rows) => rows.map((r) => Number(r.id)), (e) => (e as { code?: string }).code ?? String(e));
        const result = await outcome;
        // Either nothing completed, or PostgreSQL refused the write as a serialization failure: never a
        // second winner.
        assert.ok(
          (Array.isArray(result) && result.length === 0) || result === "40001",
          `the completion lost to the rescue (${JSON.stringify(result)})`,
        );
        const after = (await client.getJob(job.id))!;
        assert.equal(after.state, "retryable");
        const [n] = await sql.unsafe(
          `select (select count(*) from ${qs(schema)}.closed where job_id = $1)
                + (select count(*) from ${qs(schema)}.completions where $1 = any(ids)) as n`,
          [job.id],
        );
        assert.equal(Number(n.n), 1, "one closure of the attempt");
      } finally {
        await rr.end();
      }
    }),
);

engineTest(
  "queue_storage",
  "claims skip generations exhausted for their queue: a REPEATABLE READ producer writes into the new slot, a listed generation is read again once its slot is reused",
  () =>
    withSchema(async (client, schema, sql) => {
      const q = qs(schema);
      // Claims through the SQL function with a skip list, and completes what it got.
      const claimIds = async (skip: string) => {
        const rows = await sql.unsafe(
          `select job_id, lease from ${q}.claim('default', 50, 50, 'rt', '{}', '{}', 0, $1::text::bigint[])
            order by priority, seq`,
          [skip],
        );
        const items = rows.map((r) => ({ id: Number(r.job_id), lease: Number(r.lease), result: null }));
        if (items.length) {
          assert.equal((await client.engine.complete(items, { keepCompleted: true })).length, items.length);
        }
        return items.map((i) => i.id);
      };
      const exhausted = async () =>
        String((await sql.unsafe(`select ${q}.claim_exhausted('default')::text as g`))[0].g);
      const genOf = async (slot: number) =>
        Number(
          (await sql.unsafe(`select max(generation) as g from ${q}.ring_rotations where slot = $1`, [slot]))[
            0
          ].g,
        );
      const first = await client.enqueue("k", {});
      const s0 = await currentSlot(sql, schema);
      const g0 = await genOf(s0);
      const producer = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        // A REPEATABLE READ producer takes its snapshot while s0 is current and enqueues after a rotation.
        let snap!: () => void;
        const snapped = new Promise<void>((r) => snap = r);
        let go!: () => void;
        const goOn = new Promise<void>((r) => go = r);
        const rr = producer.begin("isolation level repeatable read", async (tx) => {
          assert.equal(Number((await tx.unsafe(`select ${q}.current_slot() as s`))[0].s), s0);
          snap();
          await goOn;
          return await client.enqueue("rr", {}, { tx });
        });
        await snapped;
        const s1 = await rotate(sql, schema);
        go();
        const late = await rr;
        const [row] = await sql.unsafe(`select slot from ${q}.ready where job_id = $1`, [late.id]);
        assert.equal(Number(row.slot), s1, "written into the new slot, which its snapshot cannot see");
        assert.equal(await exhausted(), "{}", "s0 still holds an unclaimed job");
        assert.deepEqual(await claimIds("{}"), [first.id, late.id]);
        assert.equal(
          await exhausted(),
          `{${g0}}`,
          "s0's generation has nothing left; the current one is never listed",
        );
        // A claim passing it reads s1 only, and still finds what is there.
        const next = await client.enqueue("k", {});
        assert.deepEqual(await claimIds(`{${g0}}`), [next.id]);
        // The ring turns until s0 is reclaimed and written again: the old generation no longer hides it.
        assert.equal(await prune(sql, schema, s0), "pruned");
        let slot = s1;
        while (slot !== s0) {
          await client.enqueue("k", {});
          slot = await rotate(sql, schema);
        }
        const again = await client.enqueue("again", {});
        const got = await claimIds(`{${g0}}`);
        assert.ok(got.includes(again.id), `the reused slot is read: ${got}`);
        // The engine's claims keep the list themselves and run everything.
        await client.enqueueMany([{ kind: "k" }, { kind: "k" }]);
        await runAll(client);
        await runAll(client);
        const [open] = await sql.unsafe(
          `select count(*) as n from ${q}.jobs where state::text not in ('completed', 'failed', 'cancelled')`,
        );
        assert.equal(Number(open.n), 0);
      } finally {
        await producer.end({ timeout: 1 }).catch(() => {});
      }
    }),
);

engineTest(
  "queue_storage",
  "a late writer into a slot being pruned: its row survives and is claimed",
  () =>
    withSchema(async (client, schema, sql) => {
      await client.enqueue("k", {}, { priority: 1 });
      const s0 = await currentSlot(sql, schema);
      // Another producer holds every shard of the lane (queue default, priority 1) in an open transaction.
      const holder = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      const writer = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        let release!: () => void;
        const held = new Promise<void>((r) => release = r);
        let locked!: () => void;
        const lockedP = new Promise<void>((r) => locked = r);
        const holding = holder.begin(async (tx) => {
          for (let s = 0; s < 4; s++) {
            await tx.unsafe(`select pg_advisory_xact_lock(${lockKey(schema, "default", 1, s)})`);
          }
          locked();
          await held;
        });
        await lockedP;
        // Its own backend: other tests running beside this one may have sessions waiting in enqueue_jobs too.
        const [{ pid: writerPid }] = await writer.unsafe(`select pg_backend_pid() as pid`);
        // The late writer reads the current slot (s0), then waits for a lane shard.
        const late = writer.unsafe(
          `select id from ${qs(schema)}.enqueue_jobs($1::text::jsonb)`,
          [JSON.stringify([{ kind: "late", queue: "default", args: {}, priority: 1, max_attempts: 5 }])],
        ).execute(); // sent now (postgres.js sends a query when it is awaited, or on execute())
        await waitFor(
          async () => {
            const [r] = await sql.unsafe(
              `select count(*) as n from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`,
              [writerPid],
            );
            return Number(r.n) > 0;
          },
          10_000,
          "the late writer to wait",
        );
        // Meanwhile the ring moves on and every row of slot s0 is consumed, but the slot is not reclaimed
        // while a producer that picked its generation is on its way to it.
        await rotate(sql, schema);
        assert.equal((await runAll(client)).length, 1);
        assert.equal(await prune(sql, schema, s0), "busy");
        const [{ gens }] = await sql.unsafe(`select ${qs(schema)}.claim_exhausted('default')::text as gens`);
        const [{ g0 }] = await sql.unsafe(
          `select max(generation) as g0 from ${qs(schema)}.ring_rotations where slot = $1`,
          [s0],
        );
        assert.ok(
          !String(gens).replace(/[{}]/g, "").split(",").includes(String(g0)),
          "s0 not listed exhausted",
        );
        release();
        await holding;
        const [{ id }] = await late;
        // The row landed in the sealed slot: it is available, claimed and completed, and the slot is not
        // truncated under it.
        const [row] = await sql.unsafe(`select slot from ${qs(schema)}.ready where job_id = $1`, [id]);
        assert.equal(Number(row.slot), s0);
        assert.equal((await client.getJob(Number(id)))!.state, "available");
        assert.equal(await prune(sql, schema, s0), "unclaimed");
        assert.deepEqual(await runAll(client), [Number(id)]);
        assert.equal((await client.getJob(Number(id)))!.state, "completed");
        // The completed late job is kept for the completed retention like every other one.
        assert.equal(await prune(sql, schema, s0, false, 3_600_000), "retained");
        assert.equal(
          (await client.getJob(Number(id)))?.state,
          "completed",
          "the late job survives the prune",
        );
      } finally {
        await holder.end({ timeout: 1 }).catch(() => {});
        await writer.end({ timeout: 1 }).catch(() => {});
      }
    }),
);

engineTest(
  "queue_storage",
  "a long transaction that read queue storage makes prune busy, one that did not lets it proceed; the leader backs off from a busy slot",
  () =>
    withSchema(async (client, schema, sql) => {
      await client.enqueueMany(Array.from({ length: 3 }, () => ({ kind: "k" })));
      const s0 = await currentSlot(sql, schema);
      await rotate(sql, schema);
      await runAll(client);
      const other = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        // A REPEATABLE READ transaction that has read the ready table (as a report would).
        await other.begin("isolation level repeatable read", async (tx) => {
          await tx.unsafe(`select count(*) from ${qs(schema)}.ready`);
          assert.equal(await prune(sql, schema, s0), "busy");
          assert.equal(await slotRows(sql, schema, s0) > 0, true, "nothing lost");
        });
        // One that holds its snapshot but never touched queue storage.
        await other.begin("isolation level repeatable read", async (tx) => {
          await tx.unsafe(`select count(*) from "${schema}".queues`);
          assert.equal(await prune(sql, schema, s0), "pruned");
        });
        // The leader's ring duty backs off from a slot it found busy: each try waits up to 50 ms for the
        // lock, and claims of the slot would queue behind it. The next tick leaves the slot alone; once the
        // backoff has passed and the reader is gone, the slot is reclaimed.
        await client.enqueueMany(Array.from({ length: 3 }, () => ({ kind: "k" })));
        const s1 = await currentSlot(sql, schema);
        await rotate(sql, schema);
        await runAll(client);
        const retention = { completed: 0, failed: 60_000 };
        // The first backoff is a second from the busy try: a tick that starts within it leaves the slot alone
        // (on a slow machine a later tick may already be past it, and is not asked).
        let tBusy = 0;
        const backedOff = async (what: string) => {
          const started = Date.now();
          const pruned = (await client.engine.maintainRing(retention, 600_000)).pruned[s1];
          if (started - tBusy < 1_000) assert.equal(pruned, undefined, what);
        };
        await other.begin("isolation level repeatable read", async (tx) => {
          await tx.unsafe(`select count(*) from ${qs(schema)}.ready`);
          tBusy = Date.now();
          assert.equal((await client.engine.maintainRing(retention, 600_000)).pruned[s1], "busy");
          await backedOff("backed off");
        });
        await backedOff("still backed off");
        await waitFor(
          async () => (await client.engine.maintainRing(retention, 600_000)).pruned[s1] === "pruned",
          180_000,
          "the slot reclaimed after the backoff",
        );
        assert.equal(await slotRows(sql, schema, s1), 0);
      } finally {
        await other.end({ timeout: 1 }).catch(() => {});
      }
    }),
);

engineTest(
  "queue_storage",
  "producer ordering: a job waits behind an uncommitted one only in its shard; an aborted one leaves a gap that is skipped",
  () =>
    withSchema(async (client, schema) => {
      const a = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        let finish!: (commit: boolean) => void;
        const decided = new Promise<boolean>((r) => finish = r);
        let inserted!: () => void;
        const insertedP = new Promise<void>((r) => inserted = r);
        // Producer A enqueues and keeps its transaction open.
        const txA = a.begin(async (tx) => {
          await tx.unsafe(
            `select * from ${qs(schema)}.enqueue_jobs($1::text::jsonb)`,
            [JSON.stringify([{ kind: "a", queue: "default", args: {}, priority: 2, max_attempts: 5 }])],
          );
          inserted();
          if (!(await decided)) throw new Error("rollback");
        }).catch(() => "rolled back");
        await insertedP;
        // Producer B (another shard) commits at once, and is claimable while A is open.
        const b = await client.enqueue("b", {});
        const first = await claim(client, "default", 10, "rt");
        assert.deepEqual(first.map((j) => j.kind), ["b"]);
        await client.engine.complete(first.map((j) => ({ id: j.id, lease: j.lease, result: null })), {
          keepCompleted: true,
        });
        // A aborts: the gap in its lane shard never stops a later job.
        finish(false);
        await txA;
        const c = await client.enqueue("c", {});
        const next = await claim(client, "default", 10, "rt");
        assert.deepEqual(next.map((j) => j.id), [c.id]);
        assert.notEqual(b.id, c.id);
      } finally {
        await a.end({ timeout: 1 }).catch(() => {});
      }
    }),
);

engineTest(
  "queue_storage",
  "two leaders at once: every rotation, promotion, rescue and prune happens once",
  () =>
    withSchema(async (client, schema, sql) => {
      const { createClient } = await import("../../src/client/client.ts");
      const second = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 3 });
      try {
        const due = await client.enqueueMany(
          Array.from({ length: 50 }, () => ({ kind: "k", runAt: new Date(Date.now() + 200) })),
        );
        await claim(client, "default", 0, "rt");
        await new Promise((r) => setTimeout(r, 300));
        const [p1, p2] = await Promise.all([client.engine.promote(), second.engine.promote()]);
        assert.equal(p1 + p2, 50, "each due job promoted once");
        const claimed = await claim(client, "default", 50, "dead-runtime");
        assert.equal(claimed.length, 50);
        const [r1, r2] = await Promise.all([client.engine.rescue(0), second.engine.rescue(0)]);
        assert.equal(r1.length + r2.length, 50, "each attempt rescued once");
        const ids = new Set([...r1, ...r2].map((r) => r.id));
        assert.equal(ids.size, 50);
        const [g] = await sql.unsafe(`select max(generation) as g from ${qs(schema)}.ring_rotations`);
        const rot = await Promise.all([1, 2, 3].map(() => sql.unsafe(`select ${qs(schema)}.rotate(0) as s`)));
        await sql.unsafe(`select ${qs(schema)}.sync_position()`);
        assert.equal(rot.filter(([r]) => r.s !== null).length >= 1, true);
        const [g2] = await sql.unsafe(`select max(generation) as g from ${qs(schema)}.ring_rotations`);
        assert.equal(
          Number(g2.g) - Number(g.g),
          rot.filter(([r]) => r.s !== null).length,
          "one generation per success",
        );
        for (const j of due) {
          const job = (await client.getJob(j.id))!;
          assert.equal(job.state, "retryable");
          assert.equal(job.errors.length, 1, "one closure per attempt");
        }
        const [dups] = await sql.unsafe(
          `select count(*) as n from (select job_id, lease from ${
            qs(schema)
          }.closed group by 1, 2 having count(*) > 1) x`,
        );
        assert.equal(Number(dups.n), 0);
      } finally {
        await second.close();
      }
    }),
);

engineTest(
  "queue_storage",
  "cancel racing a claim: the job either never runs or its attempt is cancelled",
  () =>
    withSchema(async (client) => {
      for (let round = 0; round < 20; round++) {
        const job = await client.enqueue("k", {}, { queue: `race${round}` });
        const [claimed, cancelled] = await Promise.allSettled([
          claim(client, `race${round}`, 1, "rt"),
          client.cancel(job.id),
        ]);
        assert.equal(cancelled.status, "fulfilled", String((cancelled as PromiseRejectedResult).reason));
        const after = (await client.getJob(job.id))!;
        assert.equal(after.state, "cancelled");
        const got = claimed.status === "fulfilled" ? claimed.value : [];
        if (got.length === 1) {
          // The claim won: its late completion changes nothing.
          assert.deepEqual(
            await client.engine.complete([{ id: job.id, lease: got[0].lease, result: 1 }], {
              keepCompleted: true,
            }),
            [],
          );
        }
        assert.equal((await client.getJob(job.id))!.state, "cancelled");
        assert.equal((await claim(client, `race${round}`, 1, "rt")).length, 0, "never claimable again");
      }
    }),
);

engineTest(
  "queue_storage",
  "callbacks: early complete, duplicate complete, park then complete, park-resume-complete, heartbeat while parked",
  () =>
    withSchema(async (client) => {
      const jobs = await client.enqueueMany(Array.from({ length: 4 }, () => ({ kind: "fn" })));
      const claimed = await claim(client, "default", 4, "rt", {}, { fn: 60_000 });
      const byId = new Map(claimed.map((j) => [j.id, j]));
      const [early, parkThenComplete, resumed, beat] = jobs.map((j) => byId.get(j.id)!);
      // Early: the function calls back before the worker parks; the park then does nothing.
      assert.equal((await client.completeExternal(early.callbackId!, { e: 1 })).state, "completed");
      assert.equal(
        await client.engine.park({ id: early.id, lease: early.lease, callbackId: early.callbackId! }),
        false,
      );
      await assert.rejects(client.completeExternal(early.callbackId!, { e: 2 }), /no longer pending/);
      assert.deepEqual((await client.getJob(early.id))!.result, { e: 1 });
      // Park, then complete: parking is not a closure.
      assert.equal(
        await client.engine.park({
          id: parkThenComplete.id,
          lease: parkThenComplete.lease,
          callbackId: parkThenComplete.callbackId!,
        }),
        true,
      );
      assert.equal((await client.getJob(parkThenComplete.id))!.state, "waiting_external");
      assert.equal((await client.completeExternal(parkThenComplete.callbackId!, 7)).state, "completed");
      assert.equal((await client.getJob(parkThenComplete.id))!.result, 7);
      // Park, resume (the handler goes on), then the handler completes under the same lease.
      assert.equal(
        await client.engine.park({ id: resumed.id, lease: resumed.lease, callbackId: resumed.callbackId! }),
        true,
      );
      assert.equal((await client.resumeExternal(resumed.callbackId!, "go")).state, "running");
      assert.equal((await client.getJob(resumed.id))!.state, "running");
      assert.deepEqual(
        await client.engine.complete([{ id: resumed.id, lease: resumed.lease, result: "done" }], {
          keepCompleted: true,
        }),
        [
          resumed.id,
        ],
      );
      assert.equal((await client.getJob(resumed.id))!.result, "done");
      // A heartbeat while parked moves the deadline and keeps the job waiting.
      assert.equal(
        await client.engine.park({ id: beat.id, lease: beat.lease, callbackId: beat.callbackId! }),
        true,
      );
      const hb = await client.heartbeatExternal(beat.callbackId!, { timeoutSeconds: 900 });
      assert.equal(hb.state, "waiting_external");
      assert.ok(+hb.timeoutAt! > Date.now() + 800_000);
      // A stale writer of the parked attempt (the worker's own outcome after a complete) changes nothing.
      assert.equal(
        await client.engine.fail({ id: early.id, lease: early.lease, error: "late", terminal: true }),
        null,
      );
    }),
);

engineTest(
  "queue_storage",
  "pinned slots: a paused backlog is forwarded and a long attempt moved out, then the slot is reclaimed",
  () =>
    withSchema(async (client, schema, sql) => {
      await client.pauseQueue("paused", { create: true });
      const backlog = await client.enqueueMany(
        Array.from({ length: 20 }, (_, i) => ({ kind: "k", queue: "paused", args: { i } })),
      );
      const long = await client.enqueue("long", {});
      const s0 = await currentSlot(sql, schema);
      const [attempt] = await claim(client, "default", 1, "rt");
      assert.equal(attempt.id, long.id);
      await rotate(sql, schema);
      assert.equal(await prune(sql, schema, s0), "open_attempts");
      // The long attempt leaves the ring (parkAfter 0 here) and stays running; the backlog still pins the slot.
      const [m] = await sql.unsafe(`select ${qs(schema)}.move_long_attempts($1, 0) as n`, [s0]);
      assert.equal(Number(m.n), 1);
      assert.equal((await client.getJob(long.id))!.state, "running");
      assert.equal(await prune(sql, schema, s0), "unclaimed");
      // Forwarding copies the unclaimed rows to the current slot (same lane positions) and reclaims s0.
      assert.equal(await prune(sql, schema, s0, true), "pruned");
      assert.equal(await slotRows(sql, schema, s0), 0);
      // Nothing lost, order kept: resumed, the backlog runs in enqueue order; the long job completes.
      await client.resumeQueue("paused");
      const ran = await runAll(client, "paused");
      assert.deepEqual(ran, backlog.map((j) => j.id));
      assert.deepEqual(
        await client.engine.complete([{ id: long.id, lease: attempt.lease, result: "ok" }], {
          keepCompleted: true,
        }),
        [long.id],
      );
      assert.equal((await client.getJob(long.id))!.state, "completed");
    }),
);

engineTest(
  "queue_storage",
  "a completion stays in the ring until the completed retention has passed: shown once, with its result, at every stage",
  () =>
    withSchema(async (client, schema, sql) => {
      const jobs = await client.enqueueMany([
        ...Array.from({ length: 4 }, (_, i) => ({ kind: "k", args: { i } })),
        { kind: "k", args: { u: 1 }, unique: {} },
      ]);
      const s0 = await currentSlot(sql, schema);
      await rotate(sql, schema);
      assert.equal((await runAll(client)).length, 5);
      // The unique key is released by the completion itself: the same unique job can be enqueued again.
      const again = await client.enqueue("k", { u: 1 }, { unique: {} });
      assert.notEqual(again.id, jobs[4].id);
      await client.cancel(again.id);
      const [hist0] = await sql.unsafe(
        `select count(*) as n from ${qs(schema)}.history where state = 'completed'`,
      );
      assert.equal(Number(hist0.n), 0, "nothing copied to history yet");
      const check = async (stage: string) => {
        for (const j of jobs) {
          const got = (await client.getJob(j.id))!;
          assert.equal(got.state, "completed", `${stage}: job ${j.id}`);
          assert.equal(got.result, j.id, `${stage}: result of ${j.id}`);
          assert.ok(got.finalizedAt, `${stage}: finalized_at`);
        }
        const page = await client.listJobs({ state: "completed", limit: 100 });
        assert.deepEqual(page.jobs.map((j) => j.id).sort((a, b) => a - b), jobs.map((j) => j.id), stage);
        const [t] = await sql.unsafe(`select sum(completed) as n from ${qs(schema)}.throughput(5)`);
        assert.equal(Number(t.n), 5, `${stage}: throughput counts each completion once`);
      };
      await check("in the ring");
      assert.equal(
        await prune(sql, schema, s0, false, 3_600_000),
        "retained",
        "kept for the completed retention",
      );
      await check("retained");
      // A retried completed job runs again and ends with one visible row.
      await client.retry(jobs[0].id);
      assert.equal((await client.getJob(jobs[0].id))!.state, "available");
      await runAll(client);
      assert.equal((await client.getJob(jobs[0].id))!.attempt, 1);
      assert.equal((await client.listJobs({ state: "completed", limit: 100 })).jobs.length, 5);
      // Once the retention has passed the slot is reclaimed: its completed jobs expire with it, and the
      // retried job's second life (in the current slot) stays.
      assert.equal(await prune(sql, schema, s0), "pruned");
      assert.equal(await slotRows(sql, schema, s0), 0);
      for (const j of jobs.slice(1)) assert.equal(await client.getJob(j.id), null, `job ${j.id} expired`);
      assert.equal((await client.getJob(jobs[0].id))!.state, "completed");
    }),
);

engineTest(
  "queue_storage",
  "retention 0: a slot of completed jobs is reclaimed at once, and nothing goes to history",
  () =>
    withSchema(async (client, schema, sql) => {
      const jobs = await client.enqueueMany(Array.from({ length: 3 }, () => ({ kind: "k" })));
      const s0 = await currentSlot(sql, schema);
      await rotate(sql, schema);
      for (;;) {
        const got = await claim(client, "default", 100, "rt");
        if (got.length === 0) break;
        await client.engine.complete(got.map((j) => ({ id: j.id, lease: j.lease, result: 1 })), {
          keepCompleted: false,
        });
      }
      for (const j of jobs) assert.equal((await client.getJob(j.id))!.state, "completed");
      assert.equal(await prune(sql, schema, s0), "pruned");
      for (const j of jobs) assert.equal(await client.getJob(j.id), null);
      const [h] = await sql.unsafe(`select count(*) as n from ${qs(schema)}.history`);
      assert.equal(Number(h.n), 0);
    }),
);

/**
 * The storage transition (docs/guide/upgrade.md): every refusal and no-op of `svc storage` with its exit
 * code, two operators racing, the lock timeout, the jobs that could keep finalize waiting forever (a job
 * that snoozes forever, one scheduled for next month, a parked HTTP attempt kept alive by heartbeats), an
 * older producer's direct INSERT while mixed, a producer with a stale snapshot, and a canonical-only
 * worker once active. Each test starts from a database of the older line (`--engine canonical`), so they
 * run once (in the queue_storage pass of the suite).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import type { Client } from "../../src/client/client.ts";
import { canonicalDb, DATABASE_URL, engineTest, keepLive, liveRuntimeBoth, waitFor } from "../helpers/db.ts";
import { svcIn } from "../helpers/cli.ts";
import { startWorker } from "../helpers/worker.ts";
import { claim } from "../helpers/claim.ts";
import { snooze } from "../../mod.ts";

const storage = (schema: string, ...args: string[]) => svcIn(schema, ["storage", ...args]);

function exits(r: { code: number; stdout: string; stderr: string }, code: number, re?: RegExp): void {
  assert.equal(r.code, code, `exit ${r.code}: ${r.stdout} ${r.stderr}`);
  if (re) assert.match(r.stdout + r.stderr, re);
  if (code !== 0) assert.equal(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
}

engineTest(
  "queue_storage",
  "transition: every refusal and no-op of svc storage, with its exit code",
  () =>
    canonicalDb(async (client, schema) => {
      const status = JSON.parse((await storage(schema, "status", "--json")).stdout);
      assert.equal(status.state, "canonical");
      assert.equal(status.next_step, "svc storage prepare");
      exits(
        await storage(schema, "enter-mixed-transition"),
        3,
        /not prepared: run svc storage prepare first/,
      );
      exits(await storage(schema, "finalize"), 3, /finalize is blocked: the cluster is canonical/);
      exits(await storage(schema, "abort"), 0, /nothing to abort/);
      // prepare refuses while a queue-storage object is missing.
      await client.sql.unsafe(`alter table "${schema}_qs".parked rename to parked_away`);
      exits(await storage(schema, "prepare"), 3, /queue-storage objects missing: parked/);
      await client.sql.unsafe(`alter table "${schema}_qs".parked_away rename to parked`);
      exits(await storage(schema, "prepare"), 0, /canonical -> prepared/);
      exits(await storage(schema, "prepare"), 0, /nothing to do: already prepared/);
      // enter-mixed-transition: no runtime that can execute queue storage, then a canonical-only one.
      exits(await storage(schema, "enter-mixed-transition"), 3, /no live runtime can execute queue storage/);
      await client.engine.upsertRuntime({
        id: "old:1",
        hostname: "h",
        pid: 1,
        queues: [],
        ready: true,
        leader: false,
        health: {},
      });
      await keepLive(client, "old:1");
      await client.engine.upsertRuntime({
        id: "new:2",
        hostname: "h",
        pid: 2,
        queues: [],
        engines: ["canonical", "queue_storage"],
        ready: true,
        leader: false,
        health: {},
      });
      await keepLive(client, "new:2");
      exits(
        await storage(schema, "enter-mixed-transition"),
        3,
        /1 live runtime\(s\) can execute only canonical: old:1/,
      );
      await client.engine.deleteRuntime("old:1");
      // abort from prepared is allowed.
      exits(await storage(schema, "abort"), 0, /prepared -> canonical/);
      exits(await storage(schema, "prepare"), 0);
      exits(await storage(schema, "enter-mixed-transition"), 0, /prepared -> mixed_transition/);
      exits(await storage(schema, "enter-mixed-transition"), 0, /already in mixed_transition/);
      exits(await storage(schema, "prepare"), 3, /prepare applies to a canonical cluster/);
      // finalize refuses while the canonical backlog is not empty; --check only reports.
      const left = await client.sql.unsafe(`insert into "${schema}".jobs (kind) values ('k') returning id`);
      assert.equal(
        (await client.getJob(Number(left[0].id)))!.state,
        "available",
        "an older producer's row, moved",
      );
      await client.sql.unsafe(`alter table "${schema}".jobs disable trigger jobs_moved_to_queue_storage`);
      await client.sql.unsafe(`insert into "${schema}".jobs (kind) values ('stays')`);
      await client.sql.unsafe(`alter table "${schema}".jobs enable trigger jobs_moved_to_queue_storage`);
      exits(await storage(schema, "finalize", "--check"), 3, /canonical backlog: 1 unfinished job/);
      exits(await storage(schema, "finalize"), 3, /canonical backlog: 1/);
      exits(await storage(schema, "finalize", "--wait", "--timeout", "1"), 3, /timed out: canonical backlog/);
      // abort from mixed is refused once queue storage holds a job.
      exits(await storage(schema, "abort"), 3, /queue storage holds jobs .*finish with svc storage finalize/);
      await client.sql.unsafe(`delete from "${schema}".jobs`);
      exits(await storage(schema, "finalize", "--check"), 0, /finalize is possible/);
      exits(await storage(schema, "finalize"), 0, /mixed_transition -> active/);
      exits(await storage(schema, "finalize"), 0, /already active/);
      exits(await storage(schema, "abort"), 3, /going back is not possible; restore from a backup/);
      exits(await storage(schema, "enter-mixed-transition"), 3);
      const after = JSON.parse((await storage(schema, "status", "--json")).stdout);
      assert.deepEqual([after.state, after.engine, after.abort_possible, after.next_step], [
        "active",
        "queue_storage",
        false,
        null,
      ]);
      const health = JSON.parse((await svcIn(schema, ["health", "--json"])).stdout);
      assert.deepEqual([health.storage, health.storage_transition], ["queue_storage", "active"]);
    }),
);

engineTest(
  "queue_storage",
  "transition: abort from mixed_transition is allowed while queue storage is empty",
  () =>
    canonicalDb(async (client, schema) => {
      await liveRuntimeBoth(client, "new:1");
      exits(await storage(schema, "prepare"), 0);
      exits(await storage(schema, "enter-mixed-transition"), 0);
      exits(await storage(schema, "abort"), 0, /mixed_transition -> canonical/);
      assert.equal((await client.storageStatus()).state, "canonical");
    }),
);

/** Runs a step that must change the state; a refusal shows its message. */
async function changed(
  client: Client,
  step: "prepare" | "enter-mixed-transition" | "finalize",
): Promise<void> {
  const r = await client.storageStep(step);
  assert.equal(r.outcome, "changed", `${step}: ${r.outcome}: ${r.message}`);
}

engineTest(
  "queue_storage",
  "transition: two operators racing one command get one change; enter-mixed against abort ends as one of the serial orders",
  () =>
    canonicalDb(async (client, schema) => {
      await liveRuntimeBoth(client, "new:1");
      const [a, b] = await Promise.all([storage(schema, "prepare"), storage(schema, "prepare")]);
      exits(a, 0);
      exits(b, 0);
      assert.deepEqual(
        [a.stdout, b.stdout].map((o) => /canonical -> prepared/.test(o)).sort(),
        [false, true],
        "one changed the state, the other found it done",
      );
      const t0 = Date.now();
      const [enter, abort] = await Promise.all([
        storage(schema, "enter-mixed-transition"),
        storage(schema, "abort"),
      ]);
      assert.ok(Date.now() - t0 < 20_000, "neither waited past its lock timeout");
      const end = (await client.storageStatus()).state;
      // enter then abort: mixed (empty) -> canonical; abort then enter: canonical, enter blocked.
      assert.equal(end, "canonical");
      assert.ok([0, 3].includes(enter.code) && abort.code === 0, `${enter.code} ${abort.code}`);
    }),
);

engineTest(
  "queue_storage",
  "transition: a step waits for the state row at most its lock timeout and names the holder",
  () =>
    canonicalDb(async (client, schema) => {
      const holder = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      let release: (() => void) | undefined;
      let holding: Promise<unknown> | undefined;
      try {
        let locked!: (pid: number) => void;
        const isLocked = new Promise<number>((r) => locked = r);
        holding = holder.begin(async (tx) => {
          const [p] = await tx.unsafe(
            `select pg_backend_pid() as pid from "${schema}".storage_state for update`,
          );
          locked(Number(p.pid));
          await new Promise<void>((r) => release = r);
        });
        const pid = await isLocked;
        const t0 = Date.now();
        await assert.rejects(
          client.storageStep("prepare", { lockTimeoutMs: 300 }),
          new RegExp(`could not lock the storage state within 0.3 s: held by session\\(s\\) .*${pid}`),
        );
        assert.ok(Date.now() - t0 < 5_000);
        const cli = await storage(schema, "prepare");
        exits(cli, 3, new RegExp(`held by session\\(s\\) .*${pid}`));
        release!();
        await holding;
      } finally {
        // Also when an assertion failed first: end the open transaction without an unhandled rejection.
        release?.();
        await holding?.catch(() => {});
        await holder.end({ timeout: 1 });
      }
      await changed(client, "prepare");
    }),
);

engineTest(
  "queue_storage",
  "transition: jobs that would keep finalize waiting move or finish; an older producer's INSERT lands in queue storage",
  () =>
    canonicalDb(async (client, schema) => {
      // Before the transition, on canonical: a job that snoozes forever, one scheduled next month, and an
      // HTTP attempt parked in waiting_external, kept alive by heartbeats.
      const forever = await client.enqueue("forever", {});
      const later = await client.enqueue("later", {}, { runAt: new Date(Date.now() + 30 * 86_400_000) });
      const fn = await client.enqueue("fn", {}, { queue: "http" });
      const [attempt] = await claim(client, "http", 1, "rt", {}, { fn: 3_600_000 });
      assert.equal(attempt.id, fn.id);
      assert.equal(
        await client.engine.park({ id: fn.id, lease: attempt.lease, callbackId: attempt.callbackId! }),
        true,
      );
      await client.heartbeatExternal(attempt.callbackId!, { timeoutSeconds: 3600 });

      const { stop } = await startWorker(client, {
        queues: { default: { maxWorkers: 2 } },
        handlers: { forever: () => snooze(50), later: () => "ran" },
      });
      try {
        await waitFor(
          async () => (await client.storageStatus()).runtimes.queue_storage_capable > 0,
          5000,
          "a worker",
        );
        await changed(client, "prepare");
        await changed(client, "enter-mixed-transition");
        // An older producer inserts straight into canonical's table while mixed: the row moves at once.
        const [row] = await client.sql.unsafe(
          `insert into "${schema}".jobs (kind, args) values ('direct', '{"from":"old"}') returning id, kind, args`,
        );
        assert.deepEqual(
          [row.kind, row.args],
          ["direct", { from: "old" }],
          "INSERT ... RETURNING still returns it",
        );
        const [inCanon] = await client.sql.unsafe(
          `select count(*)::int as n from "${schema}".jobs where id = $1`,
          [row.id],
        );
        assert.equal(inCanon.n, 0);
        assert.ok(await client.getJob(Number(row.id)));
        // Several rows of one INSERT move together.
        const many = await client.sql.unsafe(
          `insert into "${schema}".jobs (kind, args)
           select 'direct', jsonb_build_object('n', g) from generate_series(1, 3) g returning id`,
        );
        assert.equal(many.length, 3);
        for (const m of many) assert.equal((await client.getJob(Number(m.id)))?.kind, "direct");
        // A unique key held in queue storage refuses the row, as canonical's own index would.
        const held = await client.enqueue("direct.unique", { k: 1 }, { unique: {} });
        await assert.rejects(
          client.sql.unsafe(
            `insert into "${schema}".jobs (kind, args, unique_key) values ('direct.unique', '{}', $1)`,
            [held.uniqueKey],
          ),
          (e: { code?: string }) => e.code === "23505",
        );
        // The leader moves the waiting jobs; the snoozing one moves at its next snooze.
        await waitFor(
          async () => (await client.storageStatus()).canonical_backlog === 0,
          15_000,
          "an empty canonical backlog",
        );
        const finalize = await storage(schema, "finalize", "--wait", "--timeout", "30");
        exits(finalize, 0, /mixed_transition -> active/);
        // The parked HTTP attempt keeps its callback: the function's complete resolves it in queue storage.
        const done = await client.completeExternal(attempt.callbackId!, { ok: 1 });
        assert.deepEqual([done.jobId, done.state], [fn.id, "completed"]);
        assert.equal((await client.getJob(later.id))!.state, "scheduled");
        // It snoozes every 50 ms: read it between two runs (scheduled), when its attempt is 0 again.
        let between = (await client.getJob(forever.id))!;
        for (let i = 0; i < 200 && between.state !== "scheduled"; i++) {
          await new Promise((r) => setTimeout(r, 10));
          between = (await client.getJob(forever.id))!;
        }
        assert.equal(between.state, "scheduled");
        assert.equal(between.attempt, 0, "a snooze gives the attempt back");
      } finally {
        await stop();
      }
    }),
);

engineTest(
  "queue_storage",
  "transition: a REPEATABLE READ producer whose snapshot predates the flip gets a serialization error",
  () =>
    canonicalDb(async (client, schema) => {
      await liveRuntimeBoth(client, "new:1");
      await changed(client, "prepare");
      const producer = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        let flipped!: () => void;
        const isFlipped = new Promise<void>((r) => flipped = r);
        let started!: () => void;
        const hasSnapshot = new Promise<void>((r) => started = r);
        const tx = producer.begin("isolation level repeatable read", async (t) => {
          await t.unsafe(`select 1 from "${schema}".queues`); // takes the snapshot (state: prepared)
          started();
          await isFlipped;
          await t.unsafe(`select * from "${schema}".enqueue('k', '{}', '{}')`);
        });
        await hasSnapshot;
        await changed(client, "enter-mixed-transition");
        flipped();
        await assert.rejects(tx, (e: { code?: string }) => e.code === "40001");
      } finally {
        await producer.end({ timeout: 1 });
      }
      const [n] = await client.sql.unsafe(`select count(*)::int as n from "${schema}".jobs`);
      assert.equal(n.n, 0, "nothing was written to canonical");
    }),
);

engineTest(
  "queue_storage",
  "transition: a canonical-only worker is refused once the transition is active",
  () =>
    canonicalDb(async (client) => {
      await liveRuntimeBoth(client, "new:1");
      for (const c of ["prepare", "enter-mixed-transition", "finalize"] as const) {
        assert.equal((await client.storageStep(c)).outcome, "changed", c);
      }
      await assert.rejects(
        startWorker(client, { engines: ["canonical"], handlers: { k: () => 1 } }),
        /executes only the canonical storage engine.*active/,
      );
    }),
);

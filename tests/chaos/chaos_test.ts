/**
 * The bounded chaos run (tests/chaos/chaos.ts) on the test engine: 3 worker processes, 3,000 jobs, 25 s of
 * kills and stops and two PostgreSQL restarts (fast, immediate). Nothing lost, no attempt run twice, no
 * stale writer winning; 200 jobs throw hostile values (undefined, Symbols, throwing getters...) and each
 * fails with readable errors, no worker crashing. Beside it, the concurrent-admin case (tests/chaos/admin.ts).
 * The long version: `deno task chaos`.
 */
import assert from "node:assert/strict";
import { TEST_ENGINE } from "../helpers/db.ts";
import { runChaos } from "./chaos.ts";
import { runAdminChaos } from "./admin.ts";

Deno.test({
  name: "chaos: kill -9, SIGSTOP and database restarts under 3 workers lose no job, run no attempt twice",
  // Worker processes outlive a failing assertion only until the run's finally kills them.
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const seed = Number(Deno.env.get("SVC_CHAOS_SEED") ?? Date.now() % 100_000);
    const r = await runChaos({
      engine: TEST_ENGINE,
      jobs: 3_000,
      hostile: 200,
      workers: 3,
      faultMs: 25_000,
      faultEveryMs: 1_500,
      pgRestarts: ["fast", "immediate"],
      workMs: 20,
      seed,
      deadlineMs: 210_000, // 150 s before the hostile jobs; one run at a load average of 25 took 151 s
      log: (l) => console.log(l),
    });
    const why = `seed ${seed} (rerun with SVC_CHAOS_SEED=${seed}): ${JSON.stringify(r)}`;
    assert.equal(r.lost, 0, `no job lost; ${why}`);
    assert.equal(r.completed, r.jobs, why);
    assert.equal(r.duplicateAttempts, 0, `no attempt ran twice; ${why}`);
    assert.equal(r.staleWinners, 0, `every result is the last attempt's; ${why}`);
    assert.equal(r.withoutRun, 0, why);
    assert.equal(r.crashes, 0, `no worker exited on its own (200 jobs threw hostile values); ${why}`);
    assert.equal(r.hostileUnreadable, 0, `every hostile job failed with readable errors; ${why}`);
    assert.ok(r.kills + r.stops >= 8, `faults were injected; ${why}`);
    assert.equal(r.restarts, 2, why);
  },
});

Deno.test({
  name:
    "chaos: bulk cancel beside single cancels, bulk retry beside claims: no answer 500, no job left behind",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const r = await runAdminChaos({ engine: TEST_ENGINE, rounds: 3, jobs: 600, log: (l) => console.log(l) });
    const why = JSON.stringify(r);
    assert.equal(r.rounds, 3, why);
    assert.equal(r.internal, 0, `no answer 500 (${r.deadlocks} deadlocks); ${why}`);
    assert.equal(r.strays, 0, `every job ended as the requests left it; ${why}`);
  },
});

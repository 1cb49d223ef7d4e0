/**
 * The bounded chaos run (tests/chaos/chaos.ts) on the test engine: 3 worker processes, 3,000 jobs, 25 s of
 * kills and stops and two PostgreSQL restarts (fast, immediate). Nothing lost, no attempt run twice, no
 * stale writer winning. The long version: `deno task chaos`.
 */
import assert from "node:assert/strict";
import { TEST_ENGINE } from "../helpers/db.ts";
import { runChaos } from "./chaos.ts";

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
      workers: 3,
      faultMs: 25_000,
      faultEveryMs: 1_500,
      pgRestarts: ["fast", "immediate"],
      workMs: 20,
      seed,
      deadlineMs: 150_000,
      log: (l) => console.log(l),
    });
    const why = `seed ${seed} (rerun with SVC_CHAOS_SEED=${seed}): ${JSON.stringify(r)}`;
    assert.equal(r.lost, 0, `no job lost; ${why}`);
    assert.equal(r.completed, r.jobs, why);
    assert.equal(r.duplicateAttempts, 0, `no attempt ran twice; ${why}`);
    assert.equal(r.staleWinners, 0, `every result is the last attempt's; ${why}`);
    assert.equal(r.withoutRun, 0, why);
    assert.equal(r.crashes, 0, `no worker exited on its own; ${why}`);
    assert.ok(r.kills + r.stops >= 8, `faults were injected; ${why}`);
    assert.equal(r.restarts, 2, why);
  },
});

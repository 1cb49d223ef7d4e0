/**
 * The leader's duty schedule, on an engine of our own that records what each duty asked of it: a process that
 * has just become leader runs the duties that move jobs at once, and the housekeeping (cleanup, statistics,
 * the ring, samples) one period later.
 */
import assert from "node:assert/strict";
import { type MaintenanceContext, MaintenanceLoop } from "../../src/worker/maintenance/maintenance.ts";
import type { LeaderElection } from "../../src/worker/leader.ts";
import type { StorageEngine } from "../../src/storage/engine.ts";
import { silentLogger } from "../../mod.ts";

/** What each engine method the duties call answers when there is nothing to do. */
const IDLE: Record<string, unknown> = {
  promote: [],
  expireCallbacks: [],
  rescue: [],
  abandonedAttempts: [],
  cleanup: 0,
  refreshStatistics: false,
  maintainRing: { rotated: null, moved: 0, pruned: {} },
};

Deno.test("maintenance: a new leader promotes and rescues at once, and its housekeeping waits one period", async () => {
  const calls: Array<{ name: string; at: number }> = [];
  const t0 = Date.now();
  const record = (name: string) => calls.push({ name, at: Date.now() - t0 });
  const engine = new Proxy({}, {
    get: (_t, name: string) => {
      if (name === "samples") return { record: () => (record("samples"), Promise.resolve(false)) };
      if (!(name in IDLE)) return undefined;
      return () => (record(name), Promise.resolve(IDLE[name]));
    },
  }) as unknown as StorageEngine;
  const election = {
    isLeader: true,
    tick: () => Promise.resolve(true),
    renewIfDue: () => Promise.resolve(),
    resign: () => Promise.resolve(),
  } as unknown as LeaderElection;
  const m: MaintenanceContext = {
    engine,
    logger: silentLogger,
    on: {},
    rescueAfter: 90_000,
    retention: { completed: 86_400_000, failed: 86_400_000 },
    parkAfter: 600_000,
  };
  // Ticks every 100 ms; the ring's period is a second, statistics' and samples' 5 s, cleanup's a minute.
  const loop = new MaintenanceLoop(m, election, 100, 100);
  loop.start();
  try {
    await new Promise((r) => setTimeout(r, 1_600));
  } finally {
    await loop.stop();
  }
  const first = (name: string) => calls.find((c) => c.name === name)?.at;
  for (const name of ["promote", "expireCallbacks", "rescue"]) {
    assert.ok(first(name) !== undefined && first(name)! < 500, `${name} ran at once (${first(name)} ms)`);
  }
  const ring = first("maintainRing");
  assert.ok(ring !== undefined && ring >= 1_000, `the ring ran a period after the start (${ring} ms)`);
  for (const name of ["cleanup", "refreshStatistics", "samples"]) {
    assert.equal(first(name), undefined, `${name} waits its period`);
  }
});

/**
 * A randomized concurrency test of queue storage: producers (with unique keys and scheduled jobs),
 * claimers that complete, fail, snooze or abandon their attempts, cancels, rescues, promotions and forced
 * ring rotations with prunes all run at once; then the backlog is drained and the invariants are checked
 * in SQL: one consumption per ready row, one closure per attempt, at most one open attempt per job, every
 * row at or below its lane's cursor consumed, at most one live job per unique key, and every job enqueued
 * still accounted for (nothing truncated while live). Two queues are limited while it runs (a concurrency
 * limit on c, a per-key limit on b's keys), and a checker reads, again and again, that no snapshot holds more
 * open attempts than they allow. Several seeds per run (SVC_SEEDS=a,b,c to replay);
 * a failing seed is printed.
 */
import assert from "node:assert/strict";
import { createClient } from "../../src/client/client.ts";
import { DATABASE_URL, engineTest, liveRuntime, withSchema } from "../helpers/db.ts";
import { claim } from "../helpers/claim.ts";
import type { Client } from "../../src/client/client.ts";
import type { Job } from "../../src/types.ts";

/** A small seeded PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEEDS = (Deno.env.get("SVC_SEEDS") ??
  `${Date.now() % 100000},${(Date.now() * 7) % 100000},${(Date.now() * 13) % 100000}`)
  .split(",").map(Number);
const CHAOS_MS = Number(Deno.env.get("SVC_CHAOS_MS") ?? 2500);
/** Reads of the limits a run must make for its check to count. */
const MIN_CHECKS = 20;

/**
 * Runs producers, claimers, a canceller and two leaders at once. Returns the jobs enqueued and those some
 * completion reported as completed (a completed job expires with its slot once a prune with the retention
 * 0 reclaims it: it is accounted for, not lost).
 */
async function chaos(
  client: Client,
  schema: string,
  seed: number,
): Promise<{ enqueued: Set<number>; completed: Set<number>; overLimit: string[]; checks: number }> {
  const rand = rng(seed);
  const pick = <T>(a: T[]): T => a[Math.floor(rand() * a.length)];
  const qs = `"${schema}_qs"`;
  /** When the actors stop: CHAOS_MS after they start (set just before; the setup may take a while). */
  let until = Infinity;
  let checks = 0;
  // The actors go on past CHAOS_MS until the checker has read the limits often enough to mean something
  // (a slow machine reads them a few times only in CHAOS_MS), for at most six more CHAOS_MS.
  const going = () => Date.now() < until || (checks <= MIN_CHECKS && Date.now() < until + 6 * CHAOS_MS);
  const enqueued = new Set<number>();
  const completed = new Set<number>();
  const complete = async (c: Client, items: { id: number; lease: number; result: unknown }[]) => {
    for (const id of await c.engine.complete(items, { keepCompleted: true })) completed.add(id);
  };
  const queues = ["a", "b", "c"];
  // Fleet-wide limits: at most 3 open attempts of c, at most 1 per key of b (5 keys), whatever the claimers,
  // cancels, rescues and prunes do.
  await client.setQueueLimit("c", { concurrency: 3 });
  await client.setQueueLimit("b", { perKey: { concurrency: 1 } });
  const overLimit: string[] = [];
  const others = [0, 1].map(() => createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 3 }));
  // The claimers' runtimes, as workers register them (the leaders' rescue(0) declares them dead at times).
  for (const rt of ["rt-1", "rt-2"]) await liveRuntime(client, rt);
  try {
    const producer = async (c: Client) => {
      while (Date.now() < until) { // no new jobs past CHAOS_MS, so the checker's reads get no dearer
        const n = 1 + Math.floor(rand() * 20);
        const jobs = await c.enqueueMany(Array.from({ length: n }, () => ({
          kind: "k",
          ...((q) => ({ queue: q, limitKey: q === "b" ? `k${Math.floor(rand() * 5)}` : undefined }))(
            pick(queues),
          ),
          priority: 1 + Math.floor(rand() * 4),
          args: { r: Math.floor(rand() * 50) },
          runAt: rand() < 0.1 ? new Date(Date.now() + Math.floor(rand() * 300)) : undefined,
          unique: rand() < 0.15 ? { byArgs: true } : undefined,
        })));
        for (const j of jobs) enqueued.add(j.id);
      }
    };
    const held: Job[] = [];
    const claimer = async (c: Client, runtime: string) => {
      while (going()) {
        const jobs = await claim(c, pick(queues), 1 + Math.floor(rand() * 10), runtime);
        for (const j of jobs) {
          const x = rand();
          if (x < 0.55) await complete(c, [{ id: j.id, lease: j.lease, result: j.id }]);
          else if (x < 0.7) {
            await c.engine.fail({ id: j.id, lease: j.lease, error: "e", terminal: false, retryDelayMs: 0 });
          } else if (x < 0.8) await c.engine.snooze({ id: j.id, lease: j.lease, delayMs: 50 });
          else held.push(j); // abandoned: closed late (a stale writer) or rescued
        }
        if (held.length && rand() < 0.3) {
          const j = held.splice(Math.floor(rand() * held.length), 1)[0];
          await complete(c, [{ id: j.id, lease: j.lease, result: "late" }]);
        }
      }
    };
    const canceller = async (c: Client) => {
      while (going()) {
        const ids = [...enqueued];
        if (ids.length) await c.cancel(pick(ids)).catch(() => {}); // finished ones are refused
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    // The limits, read in one snapshot: the open ring attempts of c, and of each key of b.
    const openOf = `select t.queue, t.limit_key from ${qs}.claimed_jobs t
                     where t.queue in ('b', 'c') and not ${qs}.attempt_closed(t.job_id, t.lease, t.slot, t.claim_id)`;
    const checker = async (c: Client) => {
      while (going()) {
        const rows = await c.sql.unsafe(
          `select (select count(*) from (${openOf}) o where o.queue = 'c')::int as c,
                  (select coalesce(max(n), 0) from (select count(*)::int as n from (${openOf}) o
                    where o.queue = 'b' group by o.limit_key) k) as b`,
        );
        checks++;
        if (rows[0].c > 3) overLimit.push(`${rows[0].c} open attempts of c`);
        if (rows[0].b > 1) overLimit.push(`${rows[0].b} open attempts of one key of b`);
        await new Promise((r) => setTimeout(r, 3));
      }
    };
    const leader = async (c: Client) => {
      while (going()) {
        await c.sql.unsafe(`select "${schema}".prune_limit_log()`);
        await c.engine.promote();
        await c.engine.rescue(rand() < 0.2 ? 0 : 60_000);
        if (rand() < 0.3) {
          await c.sql.unsafe(`select ${qs}.rotate(0)`);
          await c.sql.unsafe(`select ${qs}.sync_position()`);
        }
        const slots = await c.sql.unsafe(`select distinct slot from ${qs}.ring_rotations`);
        for (const { slot } of slots) {
          // The completed retention: 0 (completed jobs expire with their slot) or an hour (kept).
          await c.sql.unsafe(`select ${qs}.prune($1, 0, $2, $3)`, [
            slot,
            rand() < 0.5,
            rand() < 0.5 ? 0 : 3_600_000,
          ]);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    until = Date.now() + CHAOS_MS;
    await Promise.all([
      producer(client),
      producer(others[0]),
      claimer(others[0], "rt-1"),
      claimer(others[1], "rt-2"),
      canceller(client),
      checker(client),
      leader(others[1]),
      leader(client), // two leaders at once
    ]);
    // Drain: every attempt left open is rescued, every due job promoted and run (without the limits, which
    // would take three jobs of c per round).
    await new Promise((r) => setTimeout(r, 400));
    await client.setQueueLimit("c", {});
    await client.setQueueLimit("b", {});
    for (let round = 0; round < 200; round++) {
      await client.engine.rescue(0);
      await client.sql.unsafe(`update ${qs}.deferred set run_at = now()`);
      await client.engine.promote();
      let ran = 0;
      for (const q of queues) {
        const jobs = await claim(client, q, 200, "drain");
        ran += jobs.length;
        if (jobs.length) {
          await complete(client, jobs.map((j) => ({ id: j.id, lease: j.lease, result: "drained" })));
        }
      }
      const [open] = await client.sql.unsafe(
        `select (select count(*) from ${qs}.jobs where state::text not in ('completed', 'failed', 'cancelled')) as n`,
      );
      if (ran === 0 && Number(open.n) === 0) break;
    }
    return { enqueued, completed, overLimit, checks };
  } finally {
    await Promise.all(others.map((c) => c.close()));
  }
}

async function checkInvariants(
  client: Client,
  schema: string,
  { enqueued, completed }: { enqueued: Set<number>; completed: Set<number> },
): Promise<void> {
  const qs = `"${schema}_qs"`;
  const one = async (sql: string) => Number((await client.sql.unsafe(sql))[0].n);
  assert.equal(
    await one(`select count(*) as n from ${qs}.ready r
                where (select count(*) from ${qs}.claims c where c.queue = r.queue and c.priority = r.priority
                         and c.shard = r.shard and c.slot = r.slot and r.seq between c.first_seq and c.last_seq) > 1`),
    0,
    "a ready row is consumed at most once",
  );
  assert.equal(
    await one(
      `select count(*) as n from (select 1 from (
         select job_id, lease from ${qs}.closed
         union all select u.id, u.lease from ${qs}.completions x, unnest(x.ids, x.leases) as u(id, lease)) c
        group by job_id, lease having count(*) > 1) x`,
    ),
    0,
    "at most one closure per attempt",
  );
  assert.equal(
    await one(`select count(*) as n from (select id from ${qs}.jobs group by id having count(*) > 1) x`),
    0,
    "a job is in one place at a time",
  );
  assert.equal(
    await one(`select count(*) as n from (select job_id from (
                 select t.job_id from ${qs}.claimed_jobs t
                  where not ${qs}.attempt_closed(t.job_id, t.lease, t.slot, t.claim_id)
                 union all select job_id from ${qs}.parked) x group by job_id having count(*) > 1) y`),
    0,
    "at most one open attempt per job",
  );
  assert.equal(
    await one(`select count(*) as n from ${qs}.lanes l
                cross join lateral (select ${qs}.lane_cursor(l.queue, l.priority, l.shard) as cursor) c
                join ${qs}.ready r on r.queue = l.queue and r.priority = l.priority and r.shard = l.shard
                                  and r.seq <= c.cursor
               where not exists (select 1 from ${qs}.claims t where t.queue = r.queue and t.priority = r.priority
                                   and t.shard = r.shard and t.slot = r.slot and r.seq between t.first_seq and t.last_seq)
                 and not exists (select 1 from ${qs}.skipped s where s.queue = r.queue and s.priority = r.priority
                                   and s.shard = r.shard and s.seq = r.seq and s.slot = r.slot)`),
    0,
    "every row at or below its lane's cursor is consumed",
  );
  assert.equal(
    await one(`select count(*) as n from (select unique_key from ${qs}.jobs
                where unique_key is not null and state::text not in ('completed', 'failed', 'cancelled')
                group by unique_key having count(*) > 1) x`),
    0,
    "at most one live job per unique key",
  );
  const stuck = await client.sql.unsafe(
    `select state::text, queue, priority, count(*) as n from ${qs}.jobs
      where state::text not in ('completed', 'failed', 'cancelled') group by 1, 2, 3`,
  );
  if (stuck.length) console.error("unfinished:", JSON.stringify(stuck));
  const found = new Set(
    (await client.sql.unsafe(`select id from ${qs}.jobs`)).map((r) => Number(r.id)),
  );
  const lost = [...enqueued].filter((id) => !found.has(id) && !completed.has(id));
  assert.deepEqual(lost.slice(0, 10), [], `every enqueued job is accounted for (${lost.length} lost)`);
  assert.equal(
    await one(
      `select count(*) as n from ${qs}.jobs where state::text not in ('completed', 'failed', 'cancelled')`,
    ),
    0,
    "drained: every job finished",
  );
}

for (const seed of SEEDS) {
  engineTest(
    "queue_storage",
    `randomized concurrency, seed ${seed}: the invariants hold`,
    () =>
      withSchema(async (client, schema) => {
        try {
          const run = await chaos(client, schema, seed);
          assert.ok(run.enqueued.size > 50, `enough jobs (${run.enqueued.size})`);
          assert.ok(run.checks > MIN_CHECKS, `the limits were read often (${run.checks} times)`);
          assert.deepEqual(
            run.overLimit.slice(0, 5),
            [],
            "no snapshot held more open attempts than a limit allows",
          );
          await checkInvariants(client, schema, run);
        } catch (e) {
          console.error(`randomized concurrency failed with seed ${seed} (replay: SVC_SEEDS=${seed})`);
          if ((e as { query?: string }).query) console.error((e as { query: string }).query);
          throw e;
        }
      }, { maxConnections: 6 }),
  );
}

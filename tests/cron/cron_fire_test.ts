/**
 * Cron evaluation against a real database: at most once per fire time (compare-and-swap), missed fires
 * coalesced by default, `catchUp` bounded, pause/resume, sync that never deletes other deployments'
 * schedules, 5/6 fields and time zones; plus the pure planning helpers.
 */
import assert from "node:assert/strict";
import { createWorker, silentLogger, ValidationError } from "../../mod.ts";
import { latestFireTimes } from "../../src/cron/schedule.ts";
import { normalizeCronMap } from "../../src/cron/definition.ts";
import { evaluateCron, planFires } from "../../src/worker/maintenance/cron.ts";
import type { Client } from "../../src/client/client.ts";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";

const at = (iso: string): Date => new Date(iso);
const isos = (ds: Date[]): string[] => ds.map((d) => d.toISOString());
const TOLERANCE = 5_000;

/** The cron jobs of a schema: fire time per job, in id order. */
async function cronJobs(client: Client, name?: string): Promise<{ id: number; fire: string; runAt: Date }[]> {
  const rows = await client.sql.unsafe(
    `select id, metadata->>'cron_fire_at' as fire, run_at from (
       select id, metadata, run_at from "${client.schema}".jobs
       union all select id, metadata, run_at from "${client.schema}_qs".jobs) j
      where metadata ? 'cron' ${name ? "and metadata->>'cron' = $1" : ""} order by id`,
    name ? [name] : [],
  );
  return rows.map((r) => ({ id: Number(r.id), fire: r.fire, runAt: r.run_at }));
}

const evaluate = (client: Client) => evaluateCron(client.engine.cron, TOLERANCE, silentLogger);

Deno.test("latestFireTimes: the newest fire times in (after, until], until inclusive, DST-aware", () => {
  assert.deepEqual(
    isos(latestFireTimes("* * * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-01T00:00:05Z"), 3)),
    ["2024-01-01T00:00:03.000Z", "2024-01-01T00:00:04.000Z", "2024-01-01T00:00:05.000Z"],
  );
  assert.deepEqual(
    isos(
      latestFireTimes("* * * * * *", "UTC", at("2024-01-01T00:00:03Z"), at("2024-01-01T00:00:05.400Z"), 10),
    ),
    ["2024-01-01T00:00:04.000Z", "2024-01-01T00:00:05.000Z"],
    "after is exclusive",
  );
  assert.deepEqual(
    latestFireTimes("0 3 * * *", "UTC", at("2024-01-01T03:00:00Z"), at("2024-01-02T02:59:59Z"), 5),
    [],
  );
  assert.deepEqual(
    latestFireTimes("0 0 30 2 *", "UTC", at("2024-01-01T00:00:00Z"), at("2030-01-01T00:00:00Z"), 5),
    [],
  );
  // 02:30 Europe/Berlin does not exist on 2024-03-31: it runs right after the gap (03:00 CEST = 01:00Z).
  assert.deepEqual(
    isos(
      latestFireTimes(
        "30 2 * * *",
        "Europe/Berlin",
        at("2024-03-29T12:00:00Z"),
        at("2024-04-01T12:00:00Z"),
        10,
      ),
    ),
    ["2024-03-30T01:30:00.000Z", "2024-03-31T01:00:00.000Z", "2024-04-01T00:30:00.000Z"],
  );
});

Deno.test("planFires: on-time fires all kept; missed ones coalesced into the newest, or up to catchUp", () => {
  const now = at("2024-01-01T12:00:00.300Z");
  const s = { schedule: "* * * * * *", timezone: "UTC", catchUp: 0 };
  // Three fires in the on-time window (tick jitter, a quick hand-over): all enqueued.
  let p = planFires({ ...s, after: at("2024-01-01T11:59:57Z") }, now, TOLERANCE)!;
  assert.deepEqual(isos(p.fires), [
    "2024-01-01T11:59:58.000Z",
    "2024-01-01T11:59:59.000Z",
    "2024-01-01T12:00:00.000Z",
  ]);
  assert.equal(p.late, false);
  assert.equal(p.newest.toISOString(), "2024-01-01T12:00:00.000Z");
  // Nothing due.
  assert.equal(planFires({ ...s, after: at("2024-01-01T12:00:00Z") }, now, TOLERANCE), null);

  const hourly = { schedule: "0 * * * *", timezone: "UTC", catchUp: 0 };
  const after = at("2024-01-01T02:30:00Z"); // 9 hourly fires missed
  p = planFires({ ...hourly, after }, now, TOLERANCE)!;
  assert.deepEqual(isos(p.fires), ["2024-01-01T12:00:00.000Z"], "the on-time fire covers the missed ones");
  p = planFires({ ...hourly, after }, at("2024-01-01T12:20:00Z"), TOLERANCE)!;
  assert.deepEqual(isos(p.fires), ["2024-01-01T12:00:00.000Z"], "coalesced into the newest missed fire");
  assert.equal(p.late, true);
  p = planFires({ ...hourly, catchUp: 3, after }, at("2024-01-01T12:20:00Z"), TOLERANCE)!;
  assert.deepEqual(isos(p.fires), [
    "2024-01-01T10:00:00.000Z",
    "2024-01-01T11:00:00.000Z",
    "2024-01-01T12:00:00.000Z",
  ]);
  p = planFires({ ...hourly, catchUp: 1000, after }, at("2024-01-01T12:20:00Z"), TOLERANCE)!;
  assert.equal(p.fires.length, 10, "catchUp never goes before the last fire");
});

Deno.test("cron definitions are validated before anything connects", () => {
  const bad: [unknown, RegExp][] = [
    [
      { x: { schedule: "0 3 * *", kind: "k" } },
      /cron\.x: invalid cron schedule "0 3 \* \*": it has 4 fields/,
    ],
    [{ x: { schedule: "* * * * * * *", kind: "k" } }, /it has 7 fields/],
    [{ x: { schedule: "0 3 * * *", kind: "k", timezone: "Mars/Base" } }, /unknown time zone "Mars\/Base"/],
    [{ x: { schedule: "0 3 * * *", kind: "" } }, /kind must be a non-empty string/],
    [{ x: { schedule: "0 3 * * *", kind: "k", args: [] } }, /args of k must be a JSON object/],
    [{ x: { schedule: "0 3 * * *", kind: "k", catchUp: 5000 } }, /catchUp must be true, false or an integer/],
    [{ "bad name": { schedule: "0 3 * * *", kind: "k" } }, /invalid cron schedule name/],
  ];
  for (const [cron, re] of bad) {
    assert.throws(() => normalizeCronMap(cron as never), re);
    assert.throws(
      () =>
        createWorker({
          databaseUrl: "postgres://127.0.0.1:1/x",
          queues: { default: {} },
          cron: cron as never,
        }),
      (e: unknown) => e instanceof ValidationError && re.test((e as Error).message),
    );
  }
  const [n] = normalizeCronMap({ x: { schedule: " @daily ", kind: "k", catchUp: true } });
  assert.equal(n.schedule, "@daily");
  assert.equal(n.catchUp, 100);
  assert.equal(n.timezone, "UTC");
});

Deno.test("five leaders evaluating at once enqueue each fire time once (compare-and-swap)", async () => {
  const { client, schema, drop } = await testClient({ maxConnections: 6 });
  try {
    // The bare race: five leaders that all read the same last_fire_at (null) fire the same times.
    await client.addCron("race", { schedule: "* * * * * *", kind: "race" });
    const t = new Date(Math.floor(Date.now() / 1000) * 1000);
    const times = [2, 1, 0].map((s) => new Date(t.getTime() - s * 1000));
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map(() => client.engine.cron.fire("race", null, t, times)),
    );
    assert.deepEqual(results.map((r) => r.length).sort(), [0, 0, 0, 0, 3], "exactly one leader inserted");
    assert.deepEqual((await cronJobs(client, "race")).map((j) => j.fire), times.map((d) => d.toISOString()));
    // A leader holding a stale read (the cursor it saw has moved on) inserts nothing.
    assert.deepEqual(await client.engine.cron.fire("race", null, new Date(), [new Date()]), []);
    await client.removeCron("race");

    // Whole evaluations at once on a per-second schedule: whatever interleaving, no fire time twice.
    await client.addCron("every_second", { schedule: "* * * * * *", kind: "tick" });
    await client.sql.unsafe(
      `update "${schema}".cron_schedules set evaluate_from = now() - interval '4 seconds'`,
    );
    const counts = await Promise.all([1, 2, 3, 4, 5].map(() => evaluate(client)));
    const jobs = await cronJobs(client, "every_second");
    assert.equal(counts.reduce((a, b) => a + b), jobs.length);
    assert.ok(jobs.length >= 4, `the on-time fires of the last 4 s: ${jobs.length}`);
    assert.equal(new Set(jobs.map((j) => j.fire)).size, jobs.length, "no fire time twice");
    // Each job runs at its fire time, in order.
    assert.deepEqual(jobs.map((j) => j.runAt.toISOString()), jobs.map((j) => j.fire));
    assert.deepEqual([...jobs.map((j) => j.fire)].sort(), jobs.map((j) => j.fire));
    const c = await client.getCron("every_second");
    assert.equal(c?.lastFireAt?.toISOString(), jobs[jobs.length - 1].fire);
  } finally {
    await drop();
  }
});

Deno.test("missed fires are coalesced into one run by default; catchUp enqueues up to N", async () => {
  const { client, schema, drop } = await testClient();
  try {
    await client.addCron("daily", {
      schedule: "0 0 * * *",
      kind: "report",
      args: { full: true },
      queue: "reports",
    });
    await client.addCron("daily_catch_up", { schedule: "0 0 * * *", kind: "report", catchUp: 3 });
    // The whole fleet was down for ten days.
    await client.sql.unsafe(
      `update "${schema}".cron_schedules set evaluate_from = now() - interval '10 days'`,
    );
    await evaluate(client);
    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    const day = (n: number) => new Date(today.getTime() - n * 86_400_000).toISOString();
    assert.deepEqual((await cronJobs(client, "daily")).map((j) => j.fire), [day(0)]);
    assert.deepEqual((await cronJobs(client, "daily_catch_up")).map((j) => j.fire), [day(2), day(1), day(0)]);
    const [job] = (await client.listJobs({ queue: "reports" })).jobs;
    assert.equal(job.kind, "report");
    assert.deepEqual(job.args, { full: true });
    assert.deepEqual(job.metadata, { cron: "daily", cron_fire_at: day(0) });
    // Evaluating again adds nothing.
    await evaluate(client);
    assert.equal((await cronJobs(client)).length, 4);
  } finally {
    await drop();
  }
});

Deno.test("a 5-field schedule fires on the minute; a time zone moves the fire time", async () => {
  const { client, schema, drop } = await testClient();
  try {
    await client.addCron("minutely", { schedule: "* * * * *", kind: "m" });
    await client.sql.unsafe(
      `update "${schema}".cron_schedules set evaluate_from = now() - interval '150 seconds'`,
    );
    await evaluate(client);
    const [job] = await cronJobs(client, "minutely");
    const minute = new Date();
    minute.setUTCSeconds(0, 0);
    assert.ok(
      job.fire === minute.toISOString() || job.fire === new Date(minute.getTime() - 60_000).toISOString(),
      `fired on a whole minute: ${job.fire}`,
    );

    const tokyo = await client.addCron("tokyo", { schedule: "0 9 * * *", kind: "t", timezone: "Asia/Tokyo" });
    assert.equal(tokyo.nextFireAt?.getUTCHours(), 0, "09:00 in Tokyo is 00:00Z");
    const ny = await client.addCron("ny", {
      schedule: "30 0 9 * * *",
      kind: "t",
      timezone: "America/New_York",
    });
    assert.equal(ny.nextFireAt?.getUTCSeconds(), 30);
    assert.ok([13, 14].includes(ny.nextFireAt!.getUTCHours()), "09:00 in New York is 13:00Z or 14:00Z");
  } finally {
    await drop();
  }
});

Deno.test("paused schedules do not fire; resume skips the fires that passed while paused", async () => {
  const { client, schema, drop } = await testClient();
  try {
    await client.addCron("p", { schedule: "* * * * * *", kind: "tick" });
    const paused = await client.pauseCron("p");
    assert.equal(paused.paused, true);
    assert.equal(paused.nextFireAt, null);
    await client.sql.unsafe(
      `update "${schema}".cron_schedules set evaluate_from = now() - interval '1 hour'`,
    );
    assert.equal(await evaluate(client), 0);
    const resumed = await client.resumeCron("p");
    assert.equal(resumed.paused, false);
    await evaluate(client);
    assert.equal((await cronJobs(client)).length, 0, "nothing from the paused hour");
    await waitFor(async () => (await evaluate(client)) > 0, 5_000, "fires after resume");
    const jobs = await cronJobs(client);
    assert.ok(jobs.every((j) => new Date(j.fire) >= resumed.updatedAt), "only fire times after the resume");
    // Resuming a schedule that is not paused changes nothing.
    const again = await client.resumeCron("p");
    assert.equal(again.lastFireAt?.getTime(), (await client.getCron("p"))?.lastFireAt?.getTime());
  } finally {
    await drop();
  }
});

Deno.test("sync upserts a deployment's schedules and never deletes or un-pauses the others'", async () => {
  const { client, schema, drop } = await testClient();
  try {
    await client.engine.cron.upsert(
      normalizeCronMap({ a: { schedule: "0 1 * * *", kind: "a" } }),
      "deploy-1",
    );
    await client.engine.cron.upsert(
      normalizeCronMap({ b: { schedule: "0 2 * * *", kind: "b" } }),
      "deploy-2",
    );
    await client.pauseCron("a");
    await client.sql.unsafe(
      `update "${schema}".cron_schedules set last_fire_at = date_trunc('second', now()) - interval '1 hour' where name = 'a'`,
    );
    const before = (await client.getCron("a"))!;
    // deploy-1 restarts with a changed schedule for `a`; it does not know `b`.
    await client.engine.cron.upsert(
      normalizeCronMap({ a: { schedule: "0 5 * * *", kind: "a2", queue: "q" } }),
      "deploy-1",
    );
    const all = await client.listCron();
    assert.deepEqual(all.map((c) => c.name), ["a", "b"], "b kept");
    const a = all[0];
    assert.equal(a.schedule, "0 5 * * *");
    assert.equal(a.kind, "a2");
    assert.equal(a.queue, "q");
    assert.equal(a.paused, true, "pause survives a redeploy");
    assert.equal(a.lastFireAt?.getTime(), before.lastFireAt?.getTime(), "last fire survives a redeploy");
    assert.ok(a.updatedAt > before.updatedAt);
    assert.equal(all[1].declaredBy, "deploy-2");
  } finally {
    await drop();
  }
});

Deno.test("a worker's cron option is synced at start and its leader enqueues the fires", async () => {
  const { client, drop } = await testClient({ maxConnections: 4 });
  await client.addCron("other_deployment", { schedule: "0 0 1 1 *", kind: "yearly" });
  const { worker, stop } = await startWorker(client, {
    maxConnections: 2,
    cron: { every_second: { schedule: "* * * * * *", kind: "tick", queue: "cron_q", args: { n: 1 } } },
  });
  try {
    const synced = (await client.getCron("every_second"))!;
    assert.equal(synced.declaredBy, worker.id);
    await waitFor(async () => (await cronJobs(client, "every_second")).length >= 2, 10_000, "two fires");
    const jobs = await cronJobs(client, "every_second");
    assert.equal(new Set(jobs.map((j) => j.fire)).size, jobs.length);
    assert.deepEqual((await client.listCron()).map((c) => c.name), ["every_second", "other_deployment"]);
    const job = (await client.getJob(jobs[0].id))!;
    assert.equal(job.queue, "cron_q");
    assert.deepEqual(job.args, { n: 1 });
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("trigger enqueues now without moving the schedule; unknown names are CronNotFoundError", async () => {
  const { client, drop } = await testClient();
  try {
    await client.addCron("t", {
      schedule: "0 3 * * *",
      kind: "report",
      args: { a: 1 },
      priority: 1,
      tags: ["x"],
    });
    const job = await client.triggerCron("t");
    assert.equal(job.kind, "report");
    assert.equal(job.priority, 1);
    assert.deepEqual(job.tags, ["x"]);
    assert.deepEqual(job.metadata, { cron: "t", cron_trigger: "manual" });
    assert.equal((await client.getCron("t"))?.lastFireAt, null);
    for (const op of [client.triggerCron, client.pauseCron, client.resumeCron, client.removeCron]) {
      await assert.rejects(op("missing"), { name: "CronNotFoundError", code: "not_found" });
    }
    await assert.rejects(client.pauseCron("bad name"), ValidationError);
    await client.removeCron("t");
    assert.equal(await client.getCron("t"), null);
  } finally {
    await drop();
  }
});

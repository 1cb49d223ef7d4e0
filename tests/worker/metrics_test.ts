/**
 * Metrics (docs/reference/metrics.md): each outcome moves its counter and the histograms, scraped as
 * Prometheus text from a worker's health listener over real HTTP and parsed strictly; labels stay
 * bounded (unknown kinds are `other`, label values escaped); `metrics: false` records nothing and serves
 * no /metrics; `svc serve` answers /metrics behind its token.
 */
import assert from "node:assert/strict";
import { staleRuntime, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { claim } from "../helpers/claim.ts";
import { closedPort, pendingCallback } from "../helpers/http.ts";
import { flatten, parsePrometheus, seriesKey } from "../helpers/prometheus.ts";
import { snooze, TerminalError, type Worker } from "../../mod.ts";
import type { Client } from "../../src/client/client.ts";
import { MetricsRegistry } from "../../src/metrics/registry.ts";
import { svcMetrics } from "../../src/metrics/svc_metrics.ts";
import { createAdminServer } from "../../src/http/server.ts";

/** GET /metrics of a listener: its series, parsed strictly. */
async function scrape(addr: string): Promise<Map<string, number>> {
  const res = await fetch(`http://${addr}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return flatten(parsePrometheus(await res.text()));
}

const uid = () => crypto.randomUUID().slice(0, 8);

/**
 * A worker with a health listener on a fresh queue with `handlers`; `run` enqueues and waits; returns the
 * series before and after.
 */
async function withWorker(
  handlers: Parameters<typeof startWorker>[1]["handlers"],
  run: (
    ctx: { client: Client; queue: string; addr: string; before: Map<string, number>; worker: Worker },
  ) => Promise<void>,
  opts: Parameters<typeof startWorker>[1] = {},
): Promise<void> {
  const { client, drop } = await testClient();
  const queue = `m${uid()}`;
  const addr = `127.0.0.1:${closedPort()}`;
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    w = await startWorker(client, {
      queues: { [queue]: { maxWorkers: 4 } },
      handlers,
      healthAddr: addr,
      ...opts,
    });
    const before = await scrape(addr);
    await run({ client, queue, addr, before, worker: w.worker });
  } finally {
    await w?.stop();
    await drop();
  }
}

/**
 * Scrapes until `ok` holds (the last scrape). On a timeout the error names the last scrape's series of the
 * `families` given and what `explain` says (the state of what the test waits on).
 */
async function scrapeUntil(
  addr: string,
  ok: (s: Map<string, number>) => boolean,
  what: string,
  diagnose?: { families: string[]; explain: () => Promise<string> },
) {
  let last = new Map<string, number>();
  try {
    await waitFor(async () => ok(last = await scrape(addr)), 15_000, what);
  } catch (e) {
    if (!diagnose) throw e;
    const series = [...last].filter(([k]) => diagnose.families.some((f) => k.startsWith(f)));
    const state = await diagnose.explain().catch((x) => `(could not explain: ${x})`);
    throw new Error(`${(e as Error).message}; last scrape: ${JSON.stringify(series)}; ${state}`);
  }
  return last;
}

/**
 * Enqueues one job of `kind`, waits for it to reach `state` and for `counter` of its (queue, kind) to have
 * moved by one; the scrape after.
 */
async function runOne(
  ctx: { client: Client; queue: string; addr: string; before: Map<string, number> },
  kind: string,
  state: string,
  counter: string,
  maxAttempts = 25,
): Promise<Map<string, number>> {
  const job = await ctx.client.enqueue(kind, {}, { queue: ctx.queue, maxAttempts });
  await waitState(ctx.client, job.id, [state]);
  const key = seriesKey(counter, { queue: ctx.queue, kind });
  return await scrapeUntil(ctx.addr, (s) => delta(ctx.before, s, key) === 1, `${counter} to move`);
}

/** The increase of a series between two scrapes. */
function delta(before: Map<string, number>, after: Map<string, number>, key: string): number {
  return (after.get(key) ?? 0) - (before.get(key) ?? 0);
}

async function waitState(client: Client, id: number, states: string[]): Promise<void> {
  await waitFor(
    async () => states.includes((await client.getJob(id))?.state ?? ""),
    15_000,
    `job ${id} ${states}`,
  );
}

Deno.test("metrics: a completed attempt moves enqueued, claimed, completed and both histograms", async () => {
  const kind = `ok_${uid()}`;
  await withWorker({ [kind]: () => ({ ok: true }) }, async (ctx) => {
    const { queue, before } = ctx;
    const after = await runOne(ctx, kind, "completed", "svc_jobs_completed_total");
    const l = { queue, kind };
    assert.equal(delta(before, after, seriesKey("svc_jobs_enqueued_total", l)), 1);
    assert.equal(delta(before, after, seriesKey("svc_jobs_claimed_total", l)), 1);
    assert.equal(delta(before, after, seriesKey("svc_jobs_completed_total", l)), 1);
    assert.equal(delta(before, after, seriesKey("svc_jobs_failed_total", l)), 0);
    assert.equal(after.get(seriesKey("svc_job_pickup_lag_seconds_count", l)), 1);
    assert.equal(after.get(seriesKey("svc_job_duration_seconds_bucket", { ...l, le: "+Inf" })), 1);
    assert.ok((after.get(seriesKey("svc_claim_duration_seconds_count", { queue })) ?? 0) >= 1);
    assert.ok((after.get("svc_completion_batch_duration_seconds_count") ?? 0) >= 1);
    assert.equal(after.get(seriesKey("svc_jobs_in_flight", { queue })), 0);
    assert.equal(after.get(seriesKey("svc_jobs_prefetched", { queue })), 0);
  });
});

Deno.test("metrics: a failed attempt with retries left counts as retried, the last one as failed", async () => {
  const kind = `flaky_${uid()}`;
  await withWorker({
    [kind]: { handler: () => Promise.reject(new Error("no")), backoff: () => 0 },
  }, async (ctx) => {
    const { queue, before } = ctx;
    const after = await runOne(ctx, kind, "failed", "svc_jobs_failed_total", 2);
    const l = { queue, kind };
    assert.equal(delta(before, after, seriesKey("svc_jobs_retried_total", l)), 1);
    assert.equal(delta(before, after, seriesKey("svc_jobs_claimed_total", l)), 2);
    assert.equal(delta(before, after, seriesKey("svc_jobs_completed_total", l)), 0);
    assert.equal(after.get(seriesKey("svc_job_duration_seconds_count", l)), 2);
  });
});

Deno.test("metrics: a terminal error counts as failed, not retried", async () => {
  const kind = `term_${uid()}`;
  await withWorker(
    { [kind]: () => Promise.reject(new TerminalError("never")) },
    async (ctx) => {
      const after = await runOne(ctx, kind, "failed", "svc_jobs_failed_total");
      assert.equal(
        delta(ctx.before, after, seriesKey("svc_jobs_retried_total", { queue: ctx.queue, kind })),
        0,
      );
    },
  );
});

Deno.test("metrics: a snooze counts as snoozed", async () => {
  const kind = `snz_${uid()}`;
  await withWorker({ [kind]: () => snooze(60_000) }, async (ctx) => {
    const after = await runOne(ctx, kind, "scheduled", "svc_jobs_snoozed_total");
    assert.equal(
      delta(ctx.before, after, seriesKey("svc_jobs_completed_total", { queue: ctx.queue, kind })),
      0,
    );
  });
});

Deno.test("metrics: a cancel through the client counts as cancelled; the running handler sees it", async () => {
  const kind = `cnl_${uid()}`;
  let started = false;
  await withWorker({
    [kind]: (_job, ctx) =>
      new Promise((_, reject) => {
        started = true;
        ctx.signal.addEventListener("abort", () => reject(new Error("aborted")));
      }),
  }, async ({ client, queue, addr, before }) => {
    const job = await client.enqueue(kind, {}, { queue });
    await waitFor(() => started, 15_000, "the handler to start");
    assert.equal((await scrape(addr)).get(seriesKey("svc_jobs_in_flight", { queue })), 1);
    await client.cancel(job.id);
    await waitState(client, job.id, ["cancelled"]);
    const after = await scrape(addr);
    assert.equal(delta(before, after, seriesKey("svc_jobs_cancelled_total", { queue, kind })), 1);
  });
});

Deno.test("metrics: the leader's rescue counts as rescued; duties are timed", async () => {
  const kind = `rsc_${uid()}`;
  await withWorker({ [kind]: () => "ran" }, async ({ client, addr, before, worker }) => {
    // A queue this worker does not serve, claimed by a runtime that then died.
    const other = `r${uid()}`;
    const job = await client.enqueue(kind, {}, { queue: other });
    const [claimed] = await claim(client, other, 1, "rt-dead");
    assert.equal(claimed?.id, job.id);
    await staleRuntime(client, "rt-dead");
    // The rescue is counted inside the duty; the duty's run is counted when it ends: wait for both.
    const after = await scrapeUntil(
      addr,
      (s) =>
        delta(before, s, seriesKey("svc_jobs_rescued_total", { kind })) >= 1 &&
        delta(before, s, seriesKey("svc_leader_duty_runs_total", { duty: "rescue", outcome: "ok" })) >= 1,
      "a rescue and its duty run",
      {
        families: [
          "svc_jobs_rescued_total",
          "svc_leader_duty_runs_total",
          "svc_leader_duty_duration_seconds_count",
        ],
        explain: async () => {
          const j = await client.getJob(job.id);
          return `leader: ${worker.isLeader}; job ${job.id}: ${j?.state}, attempt ${j?.attempt}, errors ${
            JSON.stringify(j?.errors)
          }`;
        },
      },
    );
    assert.ok(
      delta(before, after, seriesKey("svc_leader_duty_runs_total", { duty: "rescue", outcome: "ok" })) >= 1,
    );
    assert.ok((after.get(seriesKey("svc_leader_duty_duration_seconds_count", { duty: "rescue" })) ?? 0) >= 1);
  });
});

Deno.test("metrics: queue depth and oldest age come from the depth definition", async () => {
  await withWorker({}, async ({ client, addr }) => {
    const waiting = `w${uid()}`;
    await client.enqueueMany([{ kind: "x", queue: waiting }, { kind: "x", queue: waiting }]);
    const s = await scrapeUntil(
      addr,
      (s) => s.get(seriesKey("svc_queue_depth", { queue: waiting })) === 2,
      "depth 2 (read at most every 5 s)",
    );
    assert.ok((s.get(seriesKey("svc_queue_oldest_available_age_seconds", { queue: waiting })) ?? -1) >= 0);
  });
});

Deno.test("metrics: kinds no worker of the process runs are labelled other; hostile label values are escaped", async () => {
  const { client, drop } = await testClient();
  try {
    const before = flatten(parsePrometheus(await svcMetrics().registry.text()));
    const queue = `h${uid()}`;
    await client.enqueue(`evil"kind\n{x="1"}\\`, {}, { queue });
    await client.enqueue(`random_${uid()}`, {}, { queue });
    const text = await svcMetrics().registry.text();
    const after = flatten(parsePrometheus(text));
    assert.equal(delta(before, after, seriesKey("svc_jobs_enqueued_total", { queue, kind: "other" })), 2);
    assert.ok(!text.includes("evil"), "an unknown kind never becomes a label");

    // The writer's escaping, with a value only the registry's own API could give it.
    const r = new MetricsRegistry();
    r.counter("svc_test_total", "help with \\ and\nnewline", ["v"]).with('a"b\\c\nd').inc(2);
    const parsed = parsePrometheus(await r.text());
    assert.equal(
      parsed.get("svc_test_total")!.samples.get(seriesKey("svc_test_total", { v: 'a"b\\c\nd' })),
      2,
    );
    assert.equal(parsed.get("svc_test_total")!.help, "help with \\\\ and\\nnewline");
  } finally {
    await drop();
  }
});

Deno.test("metrics: metrics: false records nothing and the listener serves no /metrics", async () => {
  const kind = `off_${uid()}`;
  const { client, drop } = await testClient({ metrics: false });
  const queue = `off${uid()}`;
  const addr = `127.0.0.1:${closedPort()}`;
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    w = await startWorker(client, {
      queues: { [queue]: {} },
      handlers: { [kind]: () => 1 },
      healthAddr: addr,
      metrics: false,
    });
    const job = await client.enqueue(kind, {}, { queue });
    await waitState(client, job.id, ["completed"]);
    const res = await fetch(`http://${addr}/metrics`);
    assert.equal(res.status, 404);
    await res.body?.cancel();
    const all = flatten(parsePrometheus(await svcMetrics().registry.text()));
    const mine = [...all.keys()].filter((k) => k.includes(queue));
    assert.deepEqual(mine, [], "no series of this worker's queue");
  } finally {
    await w?.stop();
    await drop();
  }
});

Deno.test("metrics: svc serve answers GET /metrics, behind its token when it has one", async () => {
  const { client, drop } = await testClient();
  try {
    const open = createAdminServer(client, { callbackAuth: { kind: "unsigned" } });
    const res = await open.fetch(new Request("http://x/metrics"));
    assert.equal(res.status, 200);
    const fams = parsePrometheus(await res.text());
    assert.equal(fams.get("svc_jobs_completed_total")?.type, "counter");
    assert.equal(fams.get("svc_job_duration_seconds")?.type, "histogram");
    assert.equal(fams.get("svc_queue_depth")?.type, "gauge");

    const locked = createAdminServer(client, {
      callbackAuth: { kind: "unsigned" },
      authToken: "s3cret-token",
    });
    const denied = await locked.fetch(new Request("http://x/metrics"));
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get("www-authenticate")?.startsWith("Bearer"), true);
    await denied.body?.cancel();
    const ok = await locked.fetch(
      new Request("http://x/metrics", { headers: { authorization: "Bearer s3cret-token" } }),
    );
    assert.equal(ok.status, 200);
    assert.ok(parsePrometheus(await ok.text()).size > 10);
  } finally {
    await drop();
  }
});

Deno.test("metrics: callbacks registered, timed out, resolved and refused", async () => {
  const kind = `cb_${uid()}`;
  await withWorker({
    [kind]: async (_job, ctx) => {
      const id = await ctx.registerCallback({ timeout: 300 });
      return await ctx.waitForCallback(id);
    },
  }, async ({ client, queue, addr, before }) => {
    await client.enqueue(kind, {}, { queue, maxAttempts: 1 });
    const after = await scrapeUntil(
      addr,
      (s) => delta(before, s, seriesKey("svc_callbacks_timed_out_total", { kind })) >= 1,
      "the callback to time out",
    );
    assert.equal(delta(before, after, seriesKey("svc_callbacks_registered_total", { queue, kind })), 1);

    // The receiver of svc serve counts what it resolves and what it refuses.
    const server = createAdminServer(client, {
      callbackAuth: { kind: "unsigned" },
      logger: { info() {}, error() {} },
    });
    const { callbackId } = await pendingCallback(client);
    const r = await server.fetch(
      new Request(`http://x/api/callbacks/${callbackId}/complete`, { method: "POST", body: "{}" }),
    );
    assert.equal(r.status, 200);
    await r.body?.cancel();
    const bad = await server.fetch(
      new Request("http://x/api/callbacks/not-a-uuid/complete", { method: "POST" }),
    );
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    const end = await scrape(addr);
    assert.equal(
      delta(after, end, seriesKey("svc_callbacks_resolved_total", { action: "complete", outcome: "ok" })),
      1,
    );
    assert.equal(
      delta(after, end, seriesKey("svc_callback_requests_rejected_total", { code: "invalid_callback_id" })),
      1,
    );
  });
});

/** The worker's health listener: /healthz, /readyz (200 and 503 with the checks), 404, 405, the env var. */
import assert from "node:assert/strict";
import { createWorker, silentLogger, ValidationError } from "../../mod.ts";
import { healthHandler, parseHealthAddr } from "../../src/worker/health_listener.ts";
import { EXPECTED_SCHEMA_VERSION } from "../../src/db/schema_version.ts";
import type { ReadinessReport } from "../../src/types.ts";
import { testClient, waitFor } from "../helpers/db.ts";
import { closedPort } from "../helpers/http.ts";
import { startWorker } from "../helpers/worker.ts";
import { spawnFixture } from "../helpers/process.ts";
import { getJson as get, waitStatus } from "../helpers/health.ts";

const CHECKS = [
  "postgres_connected",
  "schema_version",
  "expected_schema_version",
  "schema_compatible",
  "poll_loop_alive",
  "heartbeat_alive",
  "maintenance_alive",
  "shutting_down",
  "leader",
  "pooler",
  "listening",
];

Deno.test("parseHealthAddr: host:port, [ipv6]:port, :port; anything else names the fix", () => {
  assert.deepEqual(parseHealthAddr("127.0.0.1:9464"), { hostname: "127.0.0.1", port: 9464 });
  assert.deepEqual(parseHealthAddr("[::1]:9464"), { hostname: "::1", port: 9464 });
  assert.deepEqual(parseHealthAddr(":9464"), { hostname: "0.0.0.0", port: 9464 });
  assert.deepEqual(parseHealthAddr("pod.local:0"), { hostname: "pod.local", port: 0 });
  for (const bad of ["9464", "host:", "host:99999", "a:b:1", "http://x:1"]) {
    assert.throws(() => parseHealthAddr(bad), /use host:port, e\.g\. 127\.0\.0\.1:9464/, bad);
  }
  assert.throws(
    () => createWorker({ databaseUrl: "postgres://x", queues: { default: {} }, healthAddr: "nope" }),
    ValidationError,
  );
});

Deno.test("health handler: 404 for other paths, 405 for other methods, HEAD like GET", async () => {
  const report: ReadinessReport = {
    ready: true,
    postgres_connected: true,
    schema_version: 2,
    expected_schema_version: 2,
    schema_compatible: true,
    poll_loop_alive: true,
    heartbeat_alive: true,
    maintenance_alive: true,
    shutting_down: false,
    leader: false,
    pooler: "none",
    listening: true,
  };
  const h = healthHandler(() => Promise.resolve(report));
  const call = (method: string, path: string) => h(new Request(`http://x${path}`, { method }));
  let r = await call("GET", "/metrics");
  assert.equal(r.status, 404);
  assert.deepEqual(await r.json(), {
    error: "not found: the health listener serves GET /healthz and GET /readyz",
    code: "not_found",
  });
  for (const m of ["POST", "PUT", "DELETE", "PATCH"]) {
    r = await call(m, "/readyz");
    assert.equal(r.status, 405, m);
    assert.equal(r.headers.get("allow"), "GET, HEAD");
    assert.equal((await r.json()).code, "method_not_allowed");
  }
  r = await call("HEAD", "/readyz");
  assert.equal(r.status, 200);
  assert.equal(await r.text(), "");
  r = await call("GET", "/healthz/");
  assert.equal(r.status, 404);
});

Deno.test("/readyz 200 with every check, 503 naming schema_compatible when the schema is older", async () => {
  const { client, schema, drop } = await testClient({ maxConnections: 3 });
  const port = closedPort();
  const { stop } = await startWorker(client, { healthAddr: `127.0.0.1:${port}`, maxConnections: 3 });
  const base = `http://127.0.0.1:${port}`;
  try {
    const live = await get(`${base}/healthz`);
    assert.equal(live.status, 200);
    assert.deepEqual(live.body, { status: "ok" });
    assert.equal(live.headers.get("content-type"), "application/json");

    const ready = await waitStatus(`${base}/readyz`, 200, "/readyz 200");
    assert.deepEqual(Object.keys(ready.body).sort(), ["ready", ...CHECKS].sort());
    assert.equal(ready.body.ready, true);
    assert.equal(ready.body.schema_version, EXPECTED_SCHEMA_VERSION);
    assert.equal(ready.body.expected_schema_version, EXPECTED_SCHEMA_VERSION);
    for (const k of CHECKS) {
      if (k.endsWith("schema_version") || k === "pooler") continue;
      assert.equal(typeof ready.body[k], "boolean", k);
    }
    assert.equal(ready.body.pooler, "none");
    assert.equal(ready.body.listening, true);
    assert.equal(ready.body.shutting_down, false);
    assert.equal(ready.headers.get("cache-control"), "no-store");

    // A restore from an older backup: the schema is now older than the binary expects.
    await client.sql.unsafe(
      `delete from "${schema}".schema_migrations where version = ${EXPECTED_SCHEMA_VERSION}`,
    );
    const old = await get(`${base}/readyz`);
    assert.equal(old.status, 503);
    assert.equal(old.body.ready, false);
    assert.equal(old.body.schema_compatible, false);
    assert.equal(old.body.schema_version, EXPECTED_SCHEMA_VERSION - 1);
    assert.equal(old.body.postgres_connected, true);
    assert.deepEqual(Object.keys(old.body).sort(), ["ready", ...CHECKS].sort());
    assert.equal((await get(`${base}/healthz`)).status, 200, "liveness does not depend on the schema");
  } finally {
    await stop();
    await drop();
  }
});

Deno.test("worker.healthCheck() is the /readyz body; leader never gates readiness", async () => {
  const { client, drop } = await testClient({ maxConnections: 4 });
  const a = await startWorker(client, { maxConnections: 2 });
  await waitFor(() => a.worker.isLeader, 10_000, "the first worker leads");
  const port = closedPort();
  const b = await startWorker(client, { healthAddr: `127.0.0.1:${port}`, maxConnections: 2 });
  try {
    const r = await waitStatus(`http://127.0.0.1:${port}/readyz`, 200, "the follower is ready");
    assert.equal(b.worker.isLeader, false);
    assert.equal(r.body.leader, false, "a follower is ready");
    assert.equal(r.body.ready, true);
    assert.deepEqual({ ...(await b.worker.healthCheck()) }, r.body);
  } finally {
    await b.stop();
    await a.stop();
    await drop();
  }
});

Deno.test("during shutdown /readyz is 503 (shutting_down) while /healthz stays 200 through the drain", async () => {
  const { client, drop } = await testClient({ maxConnections: 3 });
  const port = closedPort();
  const base = `http://127.0.0.1:${port}`;
  let release!: () => void;
  const released = new Promise<void>((r) => release = r);
  let started!: () => void;
  const running = new Promise<void>((r) => started = r);
  const { stop } = await startWorker(client, {
    healthAddr: `127.0.0.1:${port}`,
    maxConnections: 3,
    handlers: {
      slow: async () => {
        started();
        await released;
        return "done";
      },
    },
  });
  try {
    const job = await client.enqueue("slow", {});
    await running;
    await waitStatus(`${base}/readyz`, 200, "ready before shutdown");

    const shutdown = stop(30_000);
    const during = await waitStatus(`${base}/readyz`, 503, "/readyz 503 once shutting down", 5_000);
    assert.equal(during.body.shutting_down, true);
    assert.equal(during.body.ready, false);
    assert.equal(during.body.postgres_connected, true, "only shutting_down fails");
    // The drain goes on for a while: liveness stays 200 all along.
    for (let i = 0; i < 10; i++) {
      assert.equal((await get(`${base}/healthz`)).status, 200, "healthz during the drain");
      assert.equal((await get(`${base}/readyz`)).status, 503);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await client.getJob(job.id))?.state, "running", "still draining");
    release();
    await shutdown;
    assert.equal((await client.getJob(job.id))?.state, "completed", "the drained job finished");
    await assert.rejects(fetch(`${base}/healthz`), "the listener closes when the runtime is down");
  } finally {
    release();
    await stop();
    await drop();
  }
});

Deno.test("SERVICE_HEALTH_ADDR enables the listener in a worker process", async () => {
  const { schema, drop } = await testClient({ maxConnections: 2 });
  const port = closedPort();
  const proc = spawnFixture("ops_worker.ts", schema, { SERVICE_HEALTH_ADDR: `127.0.0.1:${port}` });
  try {
    await proc.waitLine(/^started /);
    const r = await waitStatus(`http://127.0.0.1:${port}/readyz`, 200, "/readyz 200 from the worker process");
    assert.equal(r.body.ready, true);
    assert.equal((await get(`http://127.0.0.1:${port}/healthz`)).status, 200);
  } finally {
    await proc.kill("SIGTERM");
    await drop();
  }
});

Deno.test("a health address already in use fails start with a message naming the fix", async () => {
  const { client, drop } = await testClient({ maxConnections: 3 });
  const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const addr = `127.0.0.1:${(busy.addr as Deno.NetAddr).port}`;
  const worker = createWorker({
    client,
    schema: client.schema,
    queues: { default: {} },
    healthAddr: addr,
    logger: silentLogger,
    maxConnections: 3,
  });
  try {
    await assert.rejects(worker.start(), /cannot start the health listener on .*free host:port/);
  } finally {
    busy.close();
    await worker.shutdown(0);
    await drop();
  }
});

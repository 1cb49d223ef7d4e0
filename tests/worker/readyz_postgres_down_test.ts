/**
 * /readyz when PostgreSQL goes away: a throw-away cluster on its own port is stopped under a running
 * worker (the shared server on 5432 is never stopped). /readyz turns 503 naming the failed checks,
 * /healthz stays 200, and readiness comes back when the database does.
 */
import assert from "node:assert/strict";
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import { freshSchema } from "../helpers/db.ts";
import { closedPort } from "../helpers/http.ts";
import { getJson, waitStatus } from "../helpers/health.ts";
import { startCluster } from "../helpers/pg_cluster.ts";
import { FAST } from "../helpers/worker.ts";
import { svc } from "../helpers/cli.ts";

Deno.test("/readyz 503 with postgres_connected false when PostgreSQL stops; /healthz 200; ready again after restart", async () => {
  const pg = await startCluster();
  const schema = freshSchema("pgdown");
  const client = createClient({ databaseUrl: pg.url, schema, maxConnections: 2, connectTimeout: 2 });
  const port = closedPort();
  const base = `http://127.0.0.1:${port}`;
  const worker = createWorker({
    client,
    schema,
    queues: { default: { maxWorkers: 2 } },
    healthAddr: `127.0.0.1:${port}`,
    logger: silentLogger,
    maxConnections: 2,
    ...FAST,
  });
  try {
    await client.migrate();
    await worker.start();
    const up = await waitStatus(`${base}/readyz`, 200, "ready on the throw-away cluster");
    assert.equal(up.body.postgres_connected, true);
    assert.equal((await svc(["health", "--schema", schema, "--database-url", pg.url])).code, 0);

    await pg.stop();
    const down = await waitStatus(`${base}/readyz`, 503, "/readyz 503 once PostgreSQL is gone");
    assert.equal(down.body.ready, false);
    assert.equal(down.body.postgres_connected, false, "the failing check is named");
    assert.equal(down.body.schema_version, null, "unknown while unreachable");
    assert.equal(down.body.schema_compatible, false);
    assert.equal(down.body.shutting_down, false);
    const live = await getJson(`${base}/healthz`);
    assert.equal(live.status, 200, "liveness does not depend on the database");
    // The heartbeat fails too, and the health command sees the database gone.
    const later = await waitStatus(`${base}/readyz`, 503, "still 503", 5_000);
    assert.equal(later.body.postgres_connected, false);
    const cmd = await svc(["health", "--json", "--schema", schema, "--database-url", pg.url]);
    assert.equal(cmd.code, 1);
    assert.equal(JSON.parse(cmd.stdout).postgres, "unreachable");

    await pg.start();
    const back = await waitStatus(`${base}/readyz`, 200, "ready again after the restart", 30_000);
    assert.equal(back.body.postgres_connected, true);
    assert.equal(back.body.heartbeat_alive, true);
    assert.equal(back.body.poll_loop_alive, true);
  } finally {
    await worker.shutdown(1_000).catch(() => {});
    await client.close().catch(() => {});
    await pg.destroy();
  }
});

/**
 * One wire shape (src/wire.ts): the OpenAPI document describes every key the serializers write, and the
 * SQL API's job JSON has the same keys as the job JSON of the REST API and the CLI.
 */
import assert from "node:assert/strict";
import { withSchema } from "../helpers/db.ts";
import { SCHEMAS } from "../../src/http/admin_api/schemas.ts";
import { callbackToJson, cronToJson, jobToJson, queueToJson, runtimeToJson } from "../../src/wire.ts";
import type { CronSchedule } from "../../src/cron/definition.ts";
import type { CallbackRecord } from "../../src/storage/engine.ts";

const keys = (o: object) => Object.keys(o).sort();
const documented = (name: string) => Object.keys(SCHEMAS[name].properties as object).sort();
const at = new Date("2026-01-02T03:04:05.678Z");

Deno.test("wire: the OpenAPI schemas list exactly the keys the serializers write", () => {
  const callback: CallbackRecord = {
    id: "00000000-0000-4000-8000-000000000000",
    jobId: 1,
    attempt: 1,
    lease: 1,
    kind: "http",
    state: "pending",
    resolution: null,
    payload: null,
    error: null,
    deadlineAt: at,
    createdAt: at,
    resolvedAt: null,
    rejectedCount: 0,
    lastRejection: null,
  };
  assert.deepEqual(keys(callbackToJson(callback)), documented("Callback"));
  const cron: CronSchedule = {
    name: "nightly",
    schedule: "0 3 * * *",
    timezone: "UTC",
    kind: "report",
    args: {},
    queue: "default",
    priority: 2,
    maxAttempts: 25,
    tags: [],
    metadata: {},
    catchUp: 0,
    paused: false,
    lastFireAt: null,
    nextFireAt: at,
    declaredBy: null,
    createdAt: at,
    updatedAt: at,
    syncedAt: at,
  };
  assert.deepEqual(keys(cronToJson(cron)), documented("Cron"));
  const counts = {
    scheduled: 0,
    available: 1,
    running: 0,
    waiting_external: 0,
    retryable: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
  };
  assert.deepEqual(
    keys(queueToJson({ name: "default", paused: false, counts, oldestAvailableAgeSeconds: null })),
    documented("Queue"),
  );
  assert.deepEqual(
    keys(runtimeToJson({
      id: "h:1:abc",
      hostname: "h",
      pid: 1,
      queues: ["default"],
      engines: ["queue_storage"],
      ready: true,
      leader: false,
      startedAt: at,
      heartbeatAt: at,
      live: true,
    })),
    documented("Runtime"),
  );
});

Deno.test("wire: a job's JSON has the same keys from the SQL API, the serializer and the OpenAPI schema", async () => {
  await withSchema(async (client, schema, sql) => {
    const job = await client.enqueue("wire.check", { n: 1 }, { tags: ["t"], unique: {} });
    const fromTs = jobToJson((await client.getJob(job.id))!);
    const [row] = await sql.unsafe(`select ${schema}.get_job($1) as j`, [job.id]);
    const fromSql = typeof row.j === "string" ? JSON.parse(row.j) : row.j;
    assert.deepEqual(keys(fromSql), keys(fromTs));
    // `duplicate` is written only when an enqueue found the job already there, and `progress` only when
    // the latest attempt's handler reported some (the SQL API has neither).
    const dup = jobToJson(await client.enqueue("wire.check", { n: 1 }, { unique: {} }));
    assert.equal(dup.duplicate, true);
    assert.equal("progress" in dup, false);
    const reported = jobToJson({ ...(await client.getJob(job.id))!, progress: { value: { done: 1 }, at } });
    assert.deepEqual(reported.progress, { value: { done: 1 }, at: at.toISOString() });
    assert.deepEqual(keys({ ...dup, progress: reported.progress }), documented("Job"));
    assert.deepEqual(
      Object.keys((SCHEMAS.Job.properties as Record<string, { properties: object }>).progress.properties)
        .sort(),
      keys(reported.progress!),
    );
  });
});

/** SERVICE_LOG_FORMAT=json: the worker's default logger writes the same events as JSON lines. */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { spawnFixture } from "../helpers/process.ts";
import { defaultLogger, jsonLine, jsonLogger } from "../../src/worker/logger.ts";
import { ValidationError } from "../../mod.ts";

Deno.test("json logs: a worker process with SERVICE_LOG_FORMAT=json prints only JSON lines", async () => {
  const { schema, drop } = await testClient();
  try {
    const p = spawnFixture("json_log_worker.ts", schema, { SERVICE_LOG_FORMAT: "json" });
    const status = await p.status;
    assert.equal(status.code, 0);
    assert.ok(p.lines.length >= 3, `lines: ${p.lines.join("\n")}`);
    const events = p.lines.map((l) => JSON.parse(l));
    for (const e of events) {
      assert.equal(typeof e.time, "string");
      assert.ok(!Number.isNaN(Date.parse(e.time)));
      assert.ok(["info", "debug"].includes(e.level), `stdout carries info: ${JSON.stringify(e)}`);
      assert.equal(typeof e.msg, "string");
    }
    assert.ok(events.some((e) => /worker .* started on queues default/.test(e.msg)));
    assert.ok(events.some((e) => /is now the leader/.test(e.msg)));
    assert.ok(events.some((e) => /worker .* stopped/.test(e.msg)));
  } finally {
    await drop();
  }
});

Deno.test("json logs: one object per event, errors with their message and stack; bad formats refused", () => {
  const line = JSON.parse(
    jsonLine("error", ["svc: failed", new TypeError("bad\nthing"), { n: 1 }], new Date(0)),
  );
  assert.equal(line.time, "1970-01-01T00:00:00.000Z");
  assert.equal(line.level, "error");
  assert.equal(line.msg, 'svc: failed bad\nthing {"n":1}');
  assert.equal(line.error.name, "TypeError");
  assert.match(line.error.stack, /TypeError/);
  const out: string[] = [], err: string[] = [];
  const log = jsonLogger({ out: (l) => out.push(l), err: (l) => err.push(l) });
  log.debug("hidden");
  log.info("a");
  log.warn("b");
  log.error("c");
  assert.deepEqual(out.map((l) => JSON.parse(l).msg), ["a"]);
  assert.deepEqual(err.map((l) => JSON.parse(l).level), ["warn", "error"]);
  assert.ok(!out[0].includes("\n"), "one line per event");
  assert.throws(() => defaultLogger("xml"), ValidationError);
  assert.notEqual(defaultLogger("json"), defaultLogger(undefined));
});

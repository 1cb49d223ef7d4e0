/**
 * `svc job delete`, the stacks of `svc job get` and the LAST ERROR column of `svc job list`, as real
 * processes against a real database on the engine of the run.
 */
import assert from "node:assert/strict";
import { makeDue, testClient } from "../helpers/db.ts";
import { claimById, setState } from "../helpers/admin.ts";
import { svcIn } from "../helpers/cli.ts";

Deno.test("svc job get prints each attempt's error with its stack; job list shows LAST ERROR only for failed and retryable jobs", async () => {
  const { client, schema, drop } = await testClient();
  try {
    const [healed, broken] = await client.enqueueMany([{ kind: "k" }, { kind: "k", maxAttempts: 1 }]);
    const failAttempt = async (id: number, error: string, stack: string, terminal: boolean) => {
      const { lease } = await claimById(client, id);
      assert.ok(await client.engine.fail({ id, lease, error, stack, terminal, retryDelayMs: 0 }));
    };
    await failAttempt(healed.id, "flaky upstream", "Error: flaky upstream\n    at call (api.ts:3:9)", false);
    await makeDue(client, healed.id);
    await client.engine.promote();
    await setState(client, [healed.id], "completed"); // the retry completes
    await failAttempt(broken.id, "bad input", "TypeError: bad input\n    at parse (p.ts:1:1)", true);

    const get = await svcIn(schema, ["job", "get", String(healed.id)]);
    assert.equal(get.code, 0, get.stderr);
    assert.match(get.stdout, /^state: completed$/m);
    assert.match(
      get.stdout,
      /^errors: \n {2}attempt 1 at \S+: flaky upstream\n {4}Error: flaky upstream\n {8}at call \(api\.ts:3:9\)\n/m,
    );
    const json = JSON.parse((await svcIn(schema, ["job", "get", String(broken.id), "--json"])).stdout);
    assert.deepEqual(json.errors.map((e: any) => [e.error, e.stack, e.terminal]), [[
      "bad input",
      "TypeError: bad input\n    at parse (p.ts:1:1)",
      true,
    ]]);

    const list = await svcIn(schema, ["job", "list"]);
    assert.equal(list.code, 0, list.stderr);
    const rows = list.stdout.trim().split("\n");
    assert.match(rows[0], /LAST ERROR$/);
    const row = (id: number) => rows.find((r) => r.startsWith(`${id} `))!;
    assert.match(row(broken.id), /failed\s+1\/1\s+\S+\s+bad input$/);
    assert.doesNotMatch(row(healed.id), /flaky/, "a completed job shows no earlier attempt's error");
  } finally {
    await drop();
  }
});

Deno.test("svc job delete: a finished job is deleted (text and --json); unfinished exit 1 naming cancel; unknown exit 1", async () => {
  const { client, schema, drop } = await testClient();
  try {
    const [done, other, running] = await client.enqueueMany([
      { kind: "mail", queue: "q1" },
      { kind: "mail", queue: "q1" },
      { kind: "mail", queue: "q1" },
    ]);
    await setState(client, [done.id], "completed");
    await setState(client, [other.id], "failed");
    await claimById(client, running.id);

    const text = await svcIn(schema, ["job", "delete", String(done.id)]);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, `deleted job ${done.id} (mail on queue q1, completed)\n`);
    assert.equal(await client.getJob(done.id), null);

    const json = await svcIn(schema, ["job", "delete", String(other.id), "--json"]);
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).state, "failed");
    assert.equal(await client.getJob(other.id), null);

    const refused = await svcIn(schema, ["job", "delete", String(running.id)]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      new RegExp(
        `^error: job ${running.id} is running: only a completed, failed or cancelled job can be deleted; ` +
          `cancel it first with \`svc job cancel ${running.id}\`\\n$`,
      ),
    );
    assert.equal((await client.getJob(running.id))!.state, "running");

    const gone = await svcIn(schema, ["job", "delete", String(done.id)]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /^error: job \d+ not found; check the id with `svc job list`\n$/);
    const bad = await svcIn(schema, ["job", "delete", "x"]);
    assert.equal(bad.code, 2);
  } finally {
    await drop();
  }
});

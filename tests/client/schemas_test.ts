/**
 * Args schemas at enqueue (`createClient({ schemas })`): valid args are stored as given, invalid ones are
 * refused with a ValidationError naming each path and nothing is written; with a hand-written Standard
 * Schema validator, zod and valibot, on the storage engine of the run.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import * as v from "valibot";
import { countJobs, testClient } from "../helpers/db.ts";
import { crashingSchema, objectSchema } from "../helpers/schemas.ts";
import { ValidationError } from "../../mod.ts";

const emailSchema = objectSchema({ to: "string", cc: "string[]" }, { defaults: { cc: [] } });

Deno.test("schemas at enqueue: valid args stored as given, invalid ones refused by path, nothing written", async () => {
  const { client, drop } = await testClient({ schemas: { send_email: emailSchema } });
  try {
    const ok = await client.enqueue("send_email", { to: "a@example.com" });
    assert.deepEqual(ok.args, { to: "a@example.com" }, "the args as given, not the schema's output");
    assert.deepEqual((await client.getJob(ok.id))!.args, { to: "a@example.com" });

    const err = await client.enqueue("send_email", { to: 7, cc: ["b@example.com", 3] }).then(
      () => assert.fail("invalid args were enqueued"),
      (e) => e,
    );
    assert.ok(err instanceof ValidationError);
    assert.equal(err.code, "invalid_request");
    assert.equal(
      err.message,
      "args of send_email are invalid: to: expected a string; cc[1]: expected a string",
    );
    assert.deepEqual(err.issues, [
      { path: ["to"], message: "expected a string" },
      { path: ["cc", 1], message: "expected a string" },
    ]);
    await assert.rejects(
      client.enqueue("send_email"),
      /args of send_email are invalid: to: expected a string/,
    );
    // A kind without a schema is not validated.
    await client.enqueue("other", { anything: [1, { x: null }] });
    assert.equal(await countJobs(client), 2);
  } finally {
    await drop();
  }
});

Deno.test("schemas at enqueue: one invalid job of enqueueMany or a transaction writes none of them", async () => {
  const { client, drop } = await testClient({
    schemas: { send_email: objectSchema({ to: "string" }, { async: true }) },
  });
  try {
    await assert.rejects(
      client.enqueueMany([
        { kind: "send_email", args: { to: "a@example.com" } },
        { kind: "send_email", args: { to: null } },
        { kind: "other" },
      ]),
      (e: Error) =>
        e instanceof ValidationError && e.message === "job 1: args of send_email are invalid: to: " +
            "expected a string",
    );
    await assert.rejects(
      client.transaction(async (tx) => {
        await tx.enqueue("other", {});
        await tx.enqueue("send_email", {});
      }),
      ValidationError,
    );
    assert.equal(await countJobs(client), 0, "nothing was written");
    const jobs = await client.transaction(async (tx) => [
      await tx.enqueue("send_email", { to: "a@example.com" }),
      ...(await tx.enqueueMany([{ kind: "send_email", args: { to: "b@example.com" } }])),
    ]);
    assert.equal(jobs.length, 2);
    assert.equal(await countJobs(client), 2);
  } finally {
    await drop();
  }
});

Deno.test("schemas at enqueue: zod and valibot schemas, their messages and paths", async () => {
  const { client, drop } = await testClient({
    schemas: {
      zod_kind: z.object({ to: z.email(), retries: z.number().int().default(3) }),
      valibot_kind: v.object({ user: v.object({ id: v.number() }) }),
    },
  });
  try {
    const job = await client.enqueue("zod_kind", { to: "a@example.com" });
    assert.deepEqual(job.args, { to: "a@example.com" });
    await assert.rejects(
      client.enqueue("zod_kind", { to: "not an address" }),
      (e: Error) =>
        e instanceof ValidationError &&
        e.message === "args of zod_kind are invalid: to: Invalid email address",
    );
    await assert.rejects(
      client.enqueue("valibot_kind", { user: { id: "7" } }),
      (e: ValidationError) =>
        e.message ===
          'args of valibot_kind are invalid: user.id: Invalid type: Expected number but received "7"' &&
        JSON.stringify(e.issues![0].path) === '["user","id"]',
    );
    assert.equal(await countJobs(client), 1);
  } finally {
    await drop();
  }
});

Deno.test("schemas at enqueue: a validator that throws rejects the enqueue with its error", async () => {
  const crash = crashingSchema(new RangeError("the validator crashed"));
  const { client, drop } = await testClient({ schemas: { crash } });
  try {
    await assert.rejects(client.enqueue("crash", {}), RangeError);
    assert.equal(await countJobs(client), 0);
  } finally {
    await drop();
  }
});

Deno.test("schemas: an entry that is not a Standard Schema validator is refused at createClient", async () => {
  await assert.rejects(
    testClient({ schemas: { send_email: { parse: () => ({}) } as never } }),
    /schemas.send_email is not a Standard Schema validator/,
  );
  await assert.rejects(testClient({ schemas: [] as never }), /schemas must be an object/);
});

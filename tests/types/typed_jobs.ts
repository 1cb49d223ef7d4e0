/**
 * The type test of typed jobs: this module must type-check as it is (`deno check`), and every line after
 * a `@ts-expect-error` must be a type error (tests/types/typed_jobs_test.ts checks both). It is only
 * checked, never run.
 */
import {
  type Client,
  createClient,
  createWorker,
  type Handler,
  type Job,
  type JobContext,
  snooze,
  type StandardSchemaV1,
  type Task,
} from "../../mod.ts";

type Tasks = {
  send_email: { to: string; cc?: string[] };
  resize: Task<{ url: string; width?: number }, { width: number; height: number }>;
  ping: { at?: string };
};

const client = createClient<Tasks>({ databaseUrl: "postgres://127.0.0.1/x" });

// enqueue: the kind must be one of the task map's, and the args its args.
await client.enqueue("send_email", { to: "a@example.com" });
await client.enqueue("send_email", { to: "a@example.com", cc: ["b@example.com"] }, { priority: 1 });
await client.enqueue("resize", { url: "https://example.com/a.png" });
await client.enqueue("ping"); // every field optional: args may be left out
await client.enqueue("ping", {}, { queue: "ops" });
// @ts-expect-error an unknown kind
await client.enqueue("send_emial", { to: "a@example.com" });
// @ts-expect-error the args of another kind
await client.enqueue("send_email", { url: "https://example.com/a.png" });
// @ts-expect-error a field of the wrong type
await client.enqueue("send_email", { to: 42 });
// @ts-expect-error required args left out
await client.enqueue("send_email");
// @ts-expect-error a field the kind does not have
await client.enqueue("send_email", { to: "a@example.com", bcc: [] });
// @ts-expect-error an option that does not exist
await client.enqueue("ping", {}, { priorty: 1 });

const sent = await client.enqueue("send_email", { to: "a@example.com" });
const to: string = sent.args.to;
// The returned job is the type a handler of the kind gets.
const sameJob: Job<Tasks["send_email"]> = sent;
const resized: Job<Tasks["resize"]> = await client.enqueue("resize", { url: "u" });
const plainJob: Job<{ to: string; cc?: string[] }> = sent;
// @ts-expect-error the returned job's args are typed too
const wrong: number = sent.args.to;

await client.enqueueMany([{ kind: "send_email", args: { to: "a@example.com" } }, { kind: "ping" }]);
// @ts-expect-error each item's args are checked against its kind
await client.enqueueMany([{ kind: "resize", args: { to: "a@example.com" } }]);
// @ts-expect-error an unknown kind in a batch
await client.enqueueMany([{ kind: "nope", args: {} }]);

await client.transaction(async (tx) => {
  await tx.enqueue("resize", { url: "u" });
  // @ts-expect-error the transaction's enqueue is typed too
  await tx.enqueue("resize", { uri: "u" });
});

// Handlers: each gets Job<Tasks[kind]> and must return the declared result (or a snooze).
createWorker({
  client, // the worker takes the client's task map
  queues: { default: { maxWorkers: 5 } },
  handlers: {
    send_email: async (job, ctx) => {
      const address: string = job.args.to;
      const cc: string[] | undefined = job.args.cc;
      ctx.logger.info(`sending to ${address} and ${cc?.length ?? 0} more`);
      await ctx.enqueue("resize", { url: "https://example.com/a.png" });
      await ctx.enqueueMany([{ kind: "ping" }]);
      // @ts-expect-error ctx.enqueue is checked against the task map
      await ctx.enqueue("resize", { uri: "u" });
      // @ts-expect-error ctx.enqueue takes no transaction of the caller's
      await ctx.enqueue("ping", {}, { tx: null });
      return { anything: true }; // no result declared: any value
    },
    resize: {
      handler: (job) => {
        if (!job.args.width) return snooze(1_000);
        return { width: job.args.width, height: 10 };
      },
      timeout: 60_000,
    },
    // @ts-expect-error a handler for a kind the task map does not have
    unknown_kind: () => null,
  },
});

createWorker({
  client,
  queues: { default: {} },
  handlers: {
    // @ts-expect-error a result that is not the declared one
    resize: () => ({ width: "wide", height: 1 }),
    send_email: (job) => {
      // @ts-expect-error a field the args do not have
      return job.args.url;
    },
  },
});

// The types by name: Job<Tasks[kind]>, Handler<Tasks[kind], Tasks>, JobContext<Tasks>.
const resize: Handler<Tasks["resize"], Tasks> = (job: Job<Tasks["resize"]>, ctx: JobContext<Tasks>) => {
  ctx.logger.debug(job.args.url);
  return { width: job.args.width ?? 100, height: 100 };
};
const url: string = ({} as Job<Tasks["resize"]>).args.url;

// ctx.transaction completes the job with the kind's declared result; its tx enqueues typed follow-ups.
const resizeInTx: Handler<Tasks["resize"], Tasks> = (job, ctx) =>
  ctx.transaction(async (tx) => {
    await tx.enqueue("send_email", { to: job.args.url });
    ctx.progress({ step: "stored" });
    return { width: 1, height: 2 };
  }, { isolation: "repeatable read" });
const resizeWrongTx: Handler<Tasks["resize"], Tasks> = (_job, ctx) =>
  // @ts-expect-error the transaction's value is the job's result: the kind's result type
  ctx.transaction(() => Promise.resolve({ width: "wide", height: 2 }));
const resizeBadFollowUp: Handler<Tasks["resize"], Tasks> = (_job, ctx) =>
  ctx.transaction(async (tx) => {
    // @ts-expect-error the follow-up's args are checked against its kind
    await tx.enqueue("send_email", { url: "u" });
    return { width: 1, height: 2 };
  });
const badIsolation: Handler<Tasks["ping"], Tasks> = (_job, ctx) =>
  // @ts-expect-error an isolation level PostgreSQL does not have
  ctx.transaction(() => Promise.resolve(null), { isolation: "snapshot" });

// createWorker<Tasks> with a URL instead of a client.
createWorker<Tasks>({
  databaseUrl: "postgres://127.0.0.1/x",
  queues: { default: {} },
  handlers: { resize, ping: (job) => job.args.at ?? null },
});

// Schemas: a hand-written Standard Schema validator; without a task map the types come from it.
const EmailArgs: StandardSchemaV1<{ to: string }> = {
  "~standard": {
    version: 1,
    vendor: "hand-written",
    validate: (v) =>
      typeof (v as { to?: unknown })?.to === "string"
        ? { value: v as { to: string } }
        : { issues: [{ message: "expected a string", path: ["to"] }] },
  },
};
const fromSchemas = createClient({
  databaseUrl: "postgres://127.0.0.1/x",
  schemas: { send_email: EmailArgs },
});
await fromSchemas.enqueue("send_email", { to: "a@example.com" });
// @ts-expect-error args the schema's type refuses
await fromSchemas.enqueue("send_email", { to: 1 });
// @ts-expect-error a kind without a schema
await fromSchemas.enqueue("other", {});
const schemas = { send_email: EmailArgs };
createWorker<typeof schemas>({
  databaseUrl: "postgres://127.0.0.1/x",
  queues: { default: {} },
  schemas,
  handlers: { send_email: (job) => job.args.to.toUpperCase() },
});

// A schema whose input and output differ (a default): enqueue takes the input, the handler the output.
const ResizeArgs: StandardSchemaV1<{ url: string; width?: number }, { url: string; width: number }> = {
  "~standard": {
    version: 1,
    vendor: "hand-written",
    validate: (v) => ({ value: { width: 100, ...(v as any) } }),
  },
};
type SchemaTasks = { resize: Task<typeof ResizeArgs, { ok: boolean }> };
const withResults: Client<SchemaTasks> = createClient<SchemaTasks>({ schemas: { resize: ResizeArgs } });
await withResults.enqueue("resize", { url: "u" });
createWorker({
  client: withResults,
  queues: { default: {} },
  handlers: {
    resize: (job) => {
      const width: number = job.args.width;
      return { ok: width > 0 };
    },
  },
});
// @ts-expect-error a schema whose output is not the task map's args
createClient<{ send_email: { to: number } }>({ schemas: { send_email: EmailArgs } });

// Untyped use as before: any kind, any JSON object.
const untyped = createClient({ databaseUrl: "postgres://127.0.0.1/x" });
await untyped.enqueue("anything", { n: 1 });
await untyped.enqueue("anything");
await untyped.enqueueMany([{ kind: "a" }, { kind: "b", args: { x: [1] } }]);
createWorker({
  client: untyped,
  queues: { default: {} },
  handlers: { anything: (job, ctx) => ctx.enqueue("other", { n: (job.args.n as number) * 2 }) },
});

// A schema with defaults: the returned job's args are the input (as stored), the handler's the output.
const inputJob: Job<{ url: string; width?: number }> = await withResults.enqueue("resize", { url: "u" });
// @ts-expect-error the stored args need not have the output's fields
const outputJob: Job<{ url: string; width: number }> = await withResults.enqueue("resize", { url: "u" });

export {
  badIsolation,
  inputJob,
  outputJob,
  plainJob,
  resizeBadFollowUp,
  resized,
  resizeInTx,
  resizeWrongTx,
  sameJob,
  to,
  url,
  wrong,
};

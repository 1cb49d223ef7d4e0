/**
 * The quick start: migrates the database, starts a worker, enqueues a few jobs (one succeeds, one
 * retries then succeeds, one fails terminally, one is scheduled) and prints what happened.
 * Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres deno run -A examples/quickstart.ts
 */
import { createClient, createWorker, TerminalError } from "../mod.ts";

const databaseUrl = Deno.env.get("DATABASE_URL") || "postgres://postgres@127.0.0.1:5432/postgres";
const client = createClient({ databaseUrl });
const m = await client.migrate();
console.log(
  `schema ${client.schema} at version ${m.to}${m.applied.length ? ` (applied ${m.applied.join(", ")})` : ""}`,
);

let flaky = 0;
const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 5 } },
  maintenanceInterval: 200,
  handlers: {
    greet: (job) => `hello, ${job.args.name}`,
    flaky: {
      handler: () => {
        if (++flaky < 3) throw new Error(`flaky failure ${flaky}`);
        return "third time lucky";
      },
      backoff: () => 300,
    },
    reject: () => {
      throw new TerminalError("this input can never work");
    },
  },
  on: {
    completed: (job) => console.log(`completed job ${job.id} (${job.kind}): ${JSON.stringify(job.result)}`),
    retried: (job, e) => console.log(`job ${job.id} (${job.kind}) will retry: ${(e as Error).message}`),
    failed: (job, e) => console.log(`job ${job.id} (${job.kind}) failed: ${(e as Error).message}`),
  },
});
await worker.start();

const jobs = await client.enqueueMany([
  { kind: "greet", args: { name: "world" } },
  { kind: "flaky", args: {} },
  { kind: "reject", args: {} },
  { kind: "greet", args: { name: "later" }, runAt: new Date(Date.now() + 1500) },
]);
console.log(`enqueued jobs ${jobs.map((j) => j.id).join(", ")}`);

const until = Date.now() + 15_000;
while (Date.now() < until) {
  const states = await Promise.all(jobs.map(async (j) => (await client.getJob(j.id))?.state));
  if (states.every((s) => s === "completed" || s === "failed")) break;
  await new Promise((r) => setTimeout(r, 100));
}
for (const j of jobs) {
  const now = await client.getJob(j.id);
  console.log(`job ${j.id} ${j.kind}: ${now?.state} after ${now?.attempt} attempt(s)`);
}
await worker.shutdown(5_000);
await client.close();

/**
 * The worker side of the HTTP-callback walkthrough (docs/guide/http-workers.md): pushes jobs
 * of kind `greet` to examples/function_endpoint.ts, enqueues one and prints how it ended.
 * Run: DATABASE_URL=... SERVICE_CALLBACK_HMAC_SECRET=... deno run -A examples/http_worker.ts
 */
import { createClient, createWorker, parseSecret } from "../mod.ts";

const env = (name: string, fallback?: string) => Deno.env.get(name) || fallback;
const databaseUrl = env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres");
const secret = env("SERVICE_CALLBACK_HMAC_SECRET");
const client = createClient({ databaseUrl, maxConnections: 4 });

const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 10 } },
  httpWorkers: {
    greet: {
      url: env("FUNCTION_URL", "http://127.0.0.1:8000/")!,
      mode: "async",
      callbackBaseUrl: env("CALLBACK_BASE_URL", "http://127.0.0.1:4000"), // where `svc callbacks serve` listens
      callbackPathPrefix: env("CALLBACK_PATH_PREFIX", "/api/callbacks"), // = its --path-prefix
      callbackTimeout: 3_600_000,
      hmacSecret: secret ? parseSecret(secret) : undefined, // the receiver's secret; none: no signature sent
    },
  },
});
await worker.start();

const job = await client.enqueue("greet", { name: Deno.args[0] ?? "Ada" });
console.log(`enqueued job ${job.id}`);
for (let seen = "";;) {
  const j = (await client.getJob(job.id))!;
  if (j.state !== seen) console.log(`job ${j.id}: ${(seen = j.state)}`);
  if (j.state === "completed") console.log(`result: ${JSON.stringify(j.result)}`);
  if (j.state === "failed") console.log(`errors: ${JSON.stringify(j.errors)}`);
  if (["completed", "failed", "cancelled"].includes(j.state)) break;
  await new Promise((r) => setTimeout(r, 100));
}
await worker.shutdown(5_000);
await client.close();

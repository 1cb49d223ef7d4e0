/**
 * The function endpoint of the HTTP workers guide (docs/guide/http-workers.md), examples/function_endpoint.ts,
 * run as its own process: a signed worker pushes a job to it, it forwards the signature to the receiver,
 * the job completes.
 */
import assert from "node:assert/strict";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { closedPort, serveTest } from "../helpers/http.ts";
import { createCallbackRouter, parseSecret } from "../../mod.ts";

const EXAMPLE = new URL("../../examples/function_endpoint.ts", import.meta.url).pathname;

Deno.test("examples/function_endpoint.ts completes a signed job by forwarding the signature", async () => {
  const secret = parseSecret("d00d".repeat(16));
  const { client, drop } = await testClient();
  const receiver = serveTest(createCallbackRouter(client, { auth: { kind: "signed", secret } }).fetch);
  const port = closedPort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", "--allow-env", EXAMPLE],
    env: { PORT: String(port), NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped", // Deno.serve prints "Listening on ..." there
  }).spawn();
  let out = "";
  const read = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s.pipeThrough(new TextDecoderStream())) out += chunk;
  };
  const reading = Promise.all([read(child.stdout), read(child.stderr)]);
  let stop: (() => Promise<void>) | undefined;
  try {
    await waitFor(() => out.includes("Listening on"), 20_000, "the example to listen");
    ({ stop } = await startWorker(client, {
      httpWorkers: {
        greet: {
          url: `http://127.0.0.1:${port}/`,
          mode: "async",
          callbackBaseUrl: receiver.url,
          hmacSecret: secret,
        },
      },
    }));
    const job = await client.enqueue("greet", { name: "Ada" });
    const done = await waitFor(
      async () => {
        const j = (await client.getJob(job.id))!;
        return ["completed", "failed", "retryable"].includes(j.state) ? j : null;
      },
      10_000,
      "the job to finish",
    );
    assert.equal(done!.state, "completed", JSON.stringify(done!.errors));
    assert.deepEqual(done!.result, { greeting: "hello, Ada", attempt: 1 });
    await waitFor(
      () => out.includes(`job ${job.id}: complete answered 200`),
      5_000,
      "the example's log line",
    );
  } finally {
    await stop?.();
    child.kill("SIGTERM");
    await child.status;
    await reading;
    await receiver.close();
    await drop();
  }
});

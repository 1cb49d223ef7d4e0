/**
 * The code users copy, run as they would run it, each on a database of its own: the README's example (in a
 * project that maps `@svc/queue` to this checkout), examples/quickstart.ts, the HTTP workers walkthrough
 * (examples/function_endpoint.ts, `svc callbacks serve` and examples/http_worker.ts), and the testing
 * examples of the handlers guide (with `deno test`). Once per run, in the queue_storage pass.
 */
import assert from "node:assert/strict";
import { closedPort } from "../helpers/http.ts";
import { waitFor } from "../helpers/db.ts";
import { spawnDeno } from "../helpers/process.ts";
import { mustRun, PACKAGING_IGNORED as ONCE_PER_RUN_IGNORED, ROOT } from "../helpers/packaging.ts";
import { tsBlocks, withDatabase, withProject } from "./markdown.ts";
import { createClient } from "../../mod.ts";

Deno.test({
  name: "examples: the README's example runs: the job completes and ctx.logger names it",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: () =>
    withDatabase((url) =>
      withProject({}, async (dir) => {
        const [example] = tsBlocks(await Deno.readTextFile(`${ROOT}/README.md`));
        await Deno.writeTextFile(`${dir}/hello.ts`, example.code);
        const p = spawnDeno(["run", "-A", "--no-lock", "hello.ts"], { cwd: dir, env: { DATABASE_URL: url } });
        try {
          // The line the README says it logs.
          await p.waitLine(/^job 1 \(send_email, attempt 1\): sending to a@example\.com$/, 60_000);
          const client = createClient({ databaseUrl: url, maxConnections: 1 });
          try {
            const job = await waitFor(
              async () => {
                const j = await client.getJob(1);
                return j?.state === "completed" ? j : null;
              },
              10_000,
              "job 1 to complete",
            );
            assert.deepEqual([job!.kind, job!.result], ["send_email", { sent: true }]);
          } finally {
            await client.close();
          }
        } finally {
          await p.kill("SIGTERM"); // "works until Ctrl-C"
        }
      })
    ),
});

Deno.test({
  name: "examples: quickstart.ts runs each job to the end it describes",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: () =>
    withDatabase(async (url) => {
      const r = await mustRun(Deno.execPath(), ["run", "-A", "examples/quickstart.ts"], {
        cwd: ROOT,
        env: { DATABASE_URL: url },
        timeoutMs: 120_000,
      });
      for (
        const line of [
          /^job \d+ greet: completed after 1 attempt\(s\)$/m,
          /^job \d+ flaky: completed after 3 attempt\(s\)$/m,
          /^job \d+ reject: failed after 1 attempt\(s\)$/m,
          /completed job \d+ \(greet\): "hello, later"/,
        ]
      ) assert.match(r.stdout, line);
    }),
});

Deno.test({
  name: "examples: the HTTP workers walkthrough: function endpoint, svc callbacks serve, http_worker.ts",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: () =>
    withDatabase(async (url) => {
      const secret = "5e".repeat(32);
      const env = { DATABASE_URL: url, SERVICE_CALLBACK_HMAC_SECRET: secret };
      await mustRun(Deno.execPath(), ["run", "-A", "cli.ts", "migrate"], { cwd: ROOT, env });
      const fnPort = closedPort();
      const receiverPort = closedPort();
      const fn = spawnDeno(["run", "--allow-net", "--allow-env", "examples/function_endpoint.ts"], {
        cwd: ROOT,
        env: { PORT: String(fnPort) },
      });
      const receiver = spawnDeno([
        "run",
        "-A",
        "cli.ts",
        "callbacks",
        "serve",
        "--port",
        String(receiverPort),
      ], {
        cwd: ROOT,
        env,
      });
      try {
        await receiver.waitLine(/svc callbacks: listening on .*\(signed\)/, 60_000);
        await new Promise((r) => setTimeout(r, 500)); // the function endpoint logs Listening on stderr
        const worker = await mustRun(Deno.execPath(), ["run", "-A", "examples/http_worker.ts", "Grace"], {
          cwd: ROOT,
          env: {
            ...env,
            FUNCTION_URL: `http://127.0.0.1:${fnPort}/`,
            CALLBACK_BASE_URL: `http://127.0.0.1:${receiverPort}`,
          },
          timeoutMs: 120_000,
        });
        assert.match(worker.stdout, /^result: \{"attempt":1,"greeting":"hello, Grace"\}$/m, worker.stdout);
        assert.match(worker.stdout, /^job \d+: completed$/m);
        await receiver.waitLine(/^POST \/api\/callbacks\/[0-9a-f-]+\/complete 200 /, 10_000);
      } finally {
        await fn.kill("SIGTERM");
        await receiver.kill("SIGTERM");
      }
    }),
});

Deno.test({
  name: "examples: the testing examples of the handlers guide pass with deno test",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const blocks = tsBlocks(await Deno.readTextFile(`${ROOT}/docs/guide/handlers.md`))
      .filter((b) => b.section === "Testing handlers");
    assert.equal(blocks.length, 3, "runHandler, assertEnqueued and drain");
    const tests = blocks.reduce((n, b) => n + (b.code.match(/^Deno\.test\(/gm)?.length ?? 0), 0);
    const files = Object.fromEntries(blocks.map((b, i) => [`guide_${i}_test.ts`, b.code]));
    await withDatabase((url) =>
      withProject(files, async (dir) => {
        const r = await mustRun(Deno.execPath(), ["test", "-A", "--no-lock", "."], {
          cwd: dir,
          env: { DATABASE_URL: url },
          timeoutMs: 180_000,
        });
        assert.match(r.stdout, new RegExp(`ok \\| ${tests} passed \\| 0 failed`), r.stdout);
      })
    );
  },
});

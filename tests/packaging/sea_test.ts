/**
 * The Node single executable of `deno task sea` (tools/sea.ts), built once per state of the sources
 * (tests/helpers/single_binary.ts), copied into an empty folder and run there with PATH pointing at an
 * empty folder (Deno adds only its own stand-in for node): no npm, no node_modules and no file of this
 * checkout is reachable. It prints
 * svc's version, migrates a schema, reports `storage status` and `health --json`, serves the UI and
 * `GET /api/queues`, runs `callbacks serve` and completes a job through a signed callback (an unsigned
 * one is refused), runs `svc dev` on DATABASE_URL (example jobs complete), and without one says in one
 * line that it needs one. Without node or npm on PATH the test is skipped, unless CI is set.
 */
import assert from "node:assert/strict";
import { createClient } from "../../src/client/client.ts";
import { callbackUrl, parseSecret, sign, SIGNATURE_HEADER } from "../../src/contract/mod.ts";
import { EXPECTED_SCHEMA_VERSION } from "../../src/db/schema_version.ts";
import { DATABASE_URL, dropSchema, freshSchema, TEST_ENGINE } from "../helpers/db.ts";
import { pendingCallback, post } from "../helpers/http.ts";
import {
  checkServeAnswersUi,
  IN_CI,
  mustRun,
  onPath,
  PACKAGING_IGNORED,
  ROOT,
  runCommand,
  startService,
  withTempDir,
} from "../helpers/packaging.ts";
import { seaBinary } from "../helpers/single_binary.ts";
import { SVC_VERSION } from "../../tools/single_binary.ts";
import { SEA_FUSE } from "../../tools/sea.ts";

const HAVE_NODE = onPath("node") && onPath("npm");
if (!HAVE_NODE && !IN_CI && !PACKAGING_IGNORED) {
  console.log("Node single executable test skipped: node or npm not on PATH; with CI=1 this is a failure");
}

const SECRET_HEX = "5eaf00d".repeat(9) + "c";

Deno.test({
  name: "Node single executable (deno task sea): svc from one file in an empty folder, without node or npm",
  ignore: PACKAGING_IGNORED || (!HAVE_NODE && !IN_CI),
  fn: (t) =>
    withTempDir("svc-sea-", async (dir) => {
      assert.ok(HAVE_NODE, "node and npm must be on PATH (CI is set)");
      const built = await seaBinary();
      const svc = `${dir}/svc-node`;
      await Deno.copyFile(built, svc);
      const work = `${dir}/work`;
      const emptyPath = `${dir}/no-programs`;
      await Deno.mkdir(work);
      await Deno.mkdir(emptyPath);
      const schema = freshSchema("sea");
      const env = { DATABASE_URL, SERVICE_SCHEMA: schema, PATH: emptyPath, NODE_PATH: "", NODE_OPTIONS: "" };
      const opts = { cwd: work, env, timeoutMs: 120_000 };
      const client = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 2 });
      try {
        await t.step("--version and --help", async () => {
          assert.equal((await mustRun(svc, ["--version"], opts)).stdout.trim(), SVC_VERSION);
          assert.match((await mustRun(svc, ["--help"], opts)).stdout, /^Usage: svc .*\n[\s\S]*migrate/);
        });

        await t.step("migrate, storage status, health --json", async () => {
          const migrated = await mustRun(svc, ["migrate", "--engine", TEST_ENGINE], opts);
          assert.match(
            migrated.stdout,
            new RegExp(
              `migrated schema ${schema} from version 0 to ${EXPECTED_SCHEMA_VERSION} \\(storage engine ${TEST_ENGINE}\\)`,
            ),
          );
          const status = await mustRun(svc, ["storage", "status"], opts);
          assert.match(status.stdout, new RegExp(`^engine \\(new writes\\): ${TEST_ENGINE}$`, "m"));
          const health = JSON.parse((await mustRun(svc, ["health", "--json"], opts)).stdout);
          assert.equal(health.ready, true);
          assert.equal(health.postgres, "connected");
          assert.equal(health.schema_version, EXPECTED_SCHEMA_VERSION);
          assert.equal(health.storage, TEST_ENGINE);
        });

        await t.step("serve: the UI's index and GET /api/queues", async () => {
          await client.enqueue("sea.probe", { n: 1 }, { queue: "sea_q" });
          const serve = startService(svc, ["serve", "--port", "0"], opts);
          try {
            const line = await serve.waitLine(/svc serve: open http:\/\/127\.0\.0\.1:\d+\//);
            const base = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(line)![1];
            const queues = await fetch(`${base}/api/queues`);
            assert.equal(queues.status, 200);
            const body = await queues.json();
            assert.ok(
              body.queues.some((q: { name: string }) => q.name === "sea_q"),
              JSON.stringify(body),
            );
          } catch (e) {
            await serve.kill();
            throw e;
          }
          await checkServeAnswersUi(serve); // the index, app.js, /api/stats; then SIGTERM, exit 0
        });

        await t.step("callbacks serve completes a job through a signed callback", async () => {
          const { job, callbackId } = await pendingCallback(client);
          const receiver = startService(svc, ["callbacks", "serve", "--port", "0"], {
            ...opts,
            env: { ...env, SERVICE_CALLBACK_HMAC_SECRET: SECRET_HEX },
          });
          try {
            const line = await receiver.waitLine(/listening on http:\/\/127\.0\.0\.1:\d+\/api\/callbacks\//);
            assert.match(line, /\(signed\)$/);
            const base = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(line)![1];
            const url = callbackUrl(base, "/api/callbacks", callbackId);
            assert.equal((await post(url, { payload: { via: "sea" } })).status, 401, "unsigned is refused");
            const signature = sign(parseSecret(SECRET_HEX), callbackId);
            const ok = await post(url, { payload: { via: "sea" } }, { [SIGNATURE_HEADER]: signature });
            assert.equal(ok.status, 200, JSON.stringify(ok.body));
            assert.deepEqual(ok.body, { job_id: job.id, callback_id: callbackId, state: "completed" });
            const done = (await client.getJob(job.id))!;
            assert.equal(done.state, "completed");
            assert.deepEqual(done.result, { via: "sea" });
            assert.equal(await receiver.stop(), 0, receiver.lines.join("\n"));
          } finally {
            await receiver.kill();
          }
        });

        await t.step("svc dev on DATABASE_URL runs its example jobs", async () => {
          const dev = startService(svc, ["dev", "--port", "0", "--every", "0"], opts);
          try {
            await dev.waitLine(
              new RegExp(`svc dev: PostgreSQL at 127\\.0\\.0\\.1:\\d+/\\w+, schema ${schema}`),
            );
            await dev.waitLine(/svc dev: open http:\/\/127\.0\.0\.1:\d+\//);
            await dev.waitLine(/svc dev: job \d+ dev\.greet completed/);
            await dev.waitLine(/svc dev: function endpoint called back for job \d+ \(dev\.http_greet\): 200/);
            assert.equal(await dev.stop(), 0, dev.lines.join("\n"));
            assert.ok(dev.lines.includes("svc dev: stopped"), dev.lines.join("\n"));
          } finally {
            await dev.kill();
          }
        });

        await t.step("svc dev without a database says in one line that it needs one", async () => {
          const run = await runCommand(svc, ["dev"], { ...opts, env: { ...env, DATABASE_URL: "" } });
          assert.equal(run.code, 1);
          assert.equal(run.stdout, "");
          assert.equal(
            run.stderr.trim(),
            "error: svc dev in a single binary needs a PostgreSQL server: set DATABASE_URL or pass " +
              "--database-url (the embedded PostgreSQL comes with the npm and JSR packages only)",
          );
          assert.deepEqual([...Deno.readDirSync(work)], [], "nothing was written (no .svc-data)");
        });
      } finally {
        await client.close();
        await dropSchema(schema);
      }
    }),
});

Deno.test({
  name:
    "deno task sea refuses, in one line, a node it cannot build on (none, missing, old, no SEA fuse, a SEA), and a folder as --output",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-sea-refusals-", async (dir) => {
      const output = `${dir}/svc-node`;
      const sea = (args: string[], env: Record<string, string> = {}) =>
        runCommand(Deno.execPath(), [
          "run",
          "-A",
          "--config",
          `${ROOT}/deno.contrib.json`,
          `${ROOT}/tools/sea.ts`,
          "--output",
          output,
          ...args,
        ], {
          cwd: ROOT,
          env,
        });
      const fake = async (name: string, body: string) => {
        await Deno.writeTextFile(`${dir}/${name}`, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
        return `${dir}/${name}`;
      };
      const cases: [Promise<{ code: number; stdout: string; stderr: string }>, RegExp, number?][] = [
        [
          sea([], { PATH: await Deno.makeTempDir({ dir }) }),
          // Deno puts its own stand-in for node on the PATH of its subprocesses when none is there.
          /^error: (no node on PATH|\S+ is Deno's stand-in for node, not Node): deno task sea builds on Node 20\.19 or later; install it, or pass --node PATH$/,
        ],
        [sea(["--node", `${dir}/missing`]), /^error: --node \S+\/missing: no such file$/],
        [
          sea(["--node", await fake("not-node", "echo hello")]),
          /^error: \S+ is not Node \(`--version`: hello\)/,
        ],
        [
          sea(["--node", await fake("old-node", "echo v18.20.4")]),
          /^error: \S+ is Node v18\.20\.4; deno task sea needs Node 20\.19 or later/,
        ],
        [
          sea(["--node", await fake("plain-node", "echo v22.11.0")]),
          /^error: \S+ \(Node v22\.11\.0\) has no single-executable support \(no NODE_SEA_FUSE_\w+ marker.*\): pass --node with an official Node binary/,
        ],
        [
          sea(["--node", await fake("sea-node", `# ${SEA_FUSE}:1\necho v22.11.0`)]),
          /^error: \S+ is already a single executable application; pass a plain node binary$/,
        ],
        [sea(["--output", dir]), /^error: \S+ is a folder: --output takes the path of the file to write$/],
        [
          sea(["--bogus"]),
          /^error: unknown argument --bogus; usage: deno task sea \[--output PATH\] \[--node PATH\]$/,
          2,
        ],
      ];
      for (const [running, re, code] of cases) {
        const run = await running;
        assert.equal(run.code, code ?? 1, run.stdout + run.stderr);
        assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
        assert.match(run.stderr.trim(), re);
        assert.deepEqual([...Deno.readDirSync(dir)].filter((e) => e.name.startsWith("svc-node")), []);
      }
    }),
});

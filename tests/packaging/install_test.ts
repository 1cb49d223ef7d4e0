/**
 * Installing svc for Deno, tried as a new user would from outside this checkout:
 *
 * - the published file set (deno.json `publish.include`, which JSR gets and which `deno compile`
 *   embeds through the module graph) runs `svc migrate` and `svc serve` (the UI answers 200) from a
 *   copy, from another folder, with the migration and UI files removed from the copy: they come from
 *   the generated modules;
 * - `mod.ts` imported by relative path, and by URL (served from 127.0.0.1), from another project
 *   whose deno.json maps nothing.
 *
 * Each runs Deno with a DENO_DIR of its own (the npm packages shared), so nothing here stays cached. The
 * single binaries have tests of their own: compile_test.ts (`deno task compile`) and sea_test.ts
 * (`deno task sea`).
 */
import assert from "node:assert/strict";
import { relative } from "node:path";
import { pathExists } from "../../src/platform/platform.ts";
import { DATABASE_URL, dropSchema, freshSchema, TEST_ENGINE } from "../helpers/db.ts";
import {
  checkServeAnswersUi,
  copyPublishedFiles,
  isolatedDenoDir,
  mustRun,
  PACKAGING_IGNORED,
  ROOT,
  startService,
  withTempDir,
} from "../helpers/packaging.ts";

const DENO = Deno.execPath();

Deno.test({
  name: "published file set: svc migrate and svc serve from a copy, the assets from the module graph",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-published-", async (dir) => {
      const denoDir = await isolatedDenoDir(dir);
      const pkg = `${dir}/pkg`;
      const included = await copyPublishedFiles(pkg);
      assert.ok(included.some((p) => p.startsWith("src")), "src/ is published");
      assert.ok(await pathExists(`${pkg}/src/generated/migrations.ts`));
      assert.ok(await pathExists(`${pkg}/src/generated/ui.ts`));
      // Not read at run time: the generated modules hold them.
      await Deno.remove(`${pkg}/migrations`, { recursive: true }).catch(() => {});
      await Deno.remove(`${pkg}/ui`, { recursive: true }).catch(() => {});
      const elsewhere = `${dir}/elsewhere`;
      await Deno.mkdir(elsewhere);

      const schema = freshSchema("pub");
      const env = { DATABASE_URL, DENO_DIR: denoDir };
      try {
        const svc = ["run", "-A", `${pkg}/cli.ts`, "--schema", schema];
        const opts = { cwd: elsewhere, env, timeoutMs: 120_000 };
        const migrated = await mustRun(DENO, [...svc, "migrate", "--engine", TEST_ENGINE], opts);
        assert.match(migrated.stdout, new RegExp(`migrated schema ${schema} from version 0 to`));
        const serve = startService(DENO, [...svc, "serve", "--port", "0"], opts);
        await checkServeAnswersUi(serve);
      } finally {
        await dropSchema(schema);
      }
    }),
});

/** A program of another project: migrates, runs one job with a worker, prints one JSON line. */
function program(specifier: string): string {
  return `import { createClient, createWorker, EXPECTED_SCHEMA_VERSION, silentLogger } from ${
    JSON.stringify(specifier)
  };

const client = createClient({ databaseUrl: Deno.env.get("DATABASE_URL")!, schema: Deno.env.get("SVC_SCHEMA")! });
await client.migrate({ engine: Deno.env.get("SVC_ENGINE") as "canonical" | "queue_storage" });
const worker = createWorker({
  client,
  queues: { default: { maxWorkers: 2 } },
  handlers: { double: (job) => Promise.resolve({ twice: (job.args.n as number) * 2 }) },
  logger: silentLogger,
});
await worker.start();
const job = await client.enqueue("double", { n: 21 });
let state = "";
let result: unknown;
for (const until = Date.now() + 20_000; Date.now() < until;) {
  const j = (await client.getJob(job.id))!;
  state = j.state;
  result = j.result;
  if (state === "completed" || state === "failed") break;
  await new Promise((r) => setTimeout(r, 50));
}
await worker.shutdown(5_000);
await client.close();
console.log(JSON.stringify({ version: EXPECTED_SCHEMA_VERSION, state, result }));
`;
}

/** Writes a project (deno.json without imports, main.ts importing `specifier`), checks and runs it. */
async function tryProject(
  dir: string,
  specifier: string,
  denoDir: string,
  checkFlags: string[] = [],
): Promise<void> {
  const proj = `${dir}/project`;
  await Deno.mkdir(proj, { recursive: true });
  await Deno.writeTextFile(`${proj}/deno.json`, JSON.stringify({ imports: {} }));
  await Deno.writeTextFile(`${proj}/main.ts`, program(specifier));
  const schema = freshSchema("imp");
  const env = { DATABASE_URL, SVC_SCHEMA: schema, SVC_ENGINE: TEST_ENGINE, DENO_DIR: denoDir };
  try {
    await mustRun(DENO, ["check", "-q", ...checkFlags, "main.ts"], { cwd: proj, env, timeoutMs: 180_000 });
    const run = await mustRun(DENO, ["run", "-A", "main.ts"], { cwd: proj, env, timeoutMs: 120_000 });
    const line = run.stdout.split("\n").find((l) => l.startsWith("{"));
    assert.ok(line, run.stdout + run.stderr);
    const { EXPECTED_SCHEMA_VERSION } = await import("../../mod.ts");
    assert.deepEqual(JSON.parse(line), {
      version: EXPECTED_SCHEMA_VERSION,
      state: "completed",
      result: { twice: 42 },
    });
  } finally {
    await dropSchema(schema);
  }
}

Deno.test({
  name: "install: mod.ts imported by relative path from another project runs jobs",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-path-", async (dir) => {
      const denoDir = await isolatedDenoDir(dir);
      const rel = relative(`${dir}/project`, `${ROOT}/mod.ts`);
      await tryProject(dir, rel.startsWith(".") ? rel : `./${rel}`, denoDir);
    }),
});

Deno.test({
  name: "install: mod.ts imported by URL (the published files over HTTP) from another project runs jobs",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-url-", async (dir) => {
      const denoDir = await isolatedDenoDir(dir);
      const served = `${dir}/served`;
      await copyPublishedFiles(served);
      const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
        const path = decodeURIComponent(new URL(req.url).pathname);
        if (path.includes("..")) return new Response("no", { status: 400 });
        try {
          const body = await Deno.readFile(served + path);
          const type = path.endsWith(".json")
            ? "application/json"
            : path.endsWith(".js")
            ? "text/javascript"
            : "application/typescript";
          return new Response(body, { headers: { "content-type": type } });
        } catch {
          return new Response("not found", { status: 404 });
        }
      });
      try {
        const host = `127.0.0.1:${server.addr.port}`;
        await tryProject(dir, `http://${host}/mod.ts`, denoDir, [`--allow-import=${host}`]);
      } finally {
        await server.shutdown();
      }
    }),
});

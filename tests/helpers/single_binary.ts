/**
 * The single executables for the packaging tests:
 *
 * - `seaBinary()`: the Node single executable, built by `deno task sea --output ...` once per state of
 *   its sources and node binary, into dist/.test-binaries/sea-<hash>/
 *   (git-ignored). Test files that run in parallel wait on a file lock for one build; a build of other
 *   sources is removed when a new one is made.
 * - `denortAvailability()`: whether `deno compile` can get denort here (DENORT_BIN, DENO_DIR's copy, or
 *   its download), and the one-line reason when it cannot.
 */
import { BinaryBuildError, capture, ROOT } from "../../tools/single_binary.ts";
import { checkDenort, compileFailure, RuntimeUnavailableError } from "../../tools/compile.ts";
import { findNode } from "../../tools/sea.ts";
import { withTempDir } from "./packaging.ts";

const CACHE = `${ROOT}/dist/.test-binaries`;

/** The files the Node single executable is built from (the sources, the npm build, the build tools). */
async function seaInputs(): Promise<string[]> {
  const files = [
    "cli.ts",
    "mod.ts",
    "deno.json",
    "deno.lock",
    "deno.contrib.json",
    "deno.contrib.lock",
    "dnt.ts",
    "tools/sea.ts",
    "tools/single_binary.ts",
  ];
  const walk = async (dir: string): Promise<void> => {
    for await (const e of Deno.readDir(`${ROOT}/${dir}`)) {
      if (e.isDirectory) await walk(`${dir}/${e.name}`);
      else if (e.isFile) files.push(`${dir}/${e.name}`);
    }
  };
  await walk("src");
  return files.sort();
}

/** A SHA-256 over the inputs' paths and contents and the node binary's path and version. */
async function seaHash(): Promise<string> {
  const node = await findNode();
  const parts: Uint8Array[] = [new TextEncoder().encode(`${node.path} ${node.version}\n`)];
  for (const f of await seaInputs()) {
    parts.push(new TextEncoder().encode(`\n${f}\n`), await Deno.readFile(`${ROOT}/${f}`));
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

let building: Promise<string> | undefined;

/** The path of a Node single executable of the current sources (built now unless already built). */
export function seaBinary(): Promise<string> {
  building ??= (async () => {
    await Deno.mkdir(CACHE, { recursive: true });
    const hash = await seaHash();
    const binary = `${CACHE}/sea-${hash}/svc-node`;
    const lock = await Deno.open(`${CACHE}/sea.lock`, { create: true, write: true });
    try {
      await lock.lock(true);
      if (!(await exists(binary))) {
        // As a user builds it: `deno task sea`, here with --output.
        const t0 = performance.now();
        const run = await capture(Deno.execPath(), ["task", "sea", "--output", binary], {
          cwd: ROOT,
          timeoutMs: 600_000,
        });
        if (run?.code !== 0 || !run.stdout.includes(`sea: wrote ${binary} (svc `)) {
          throw new Error(`deno task sea failed:\n${run?.stdout}${run?.stderr}`);
        }
        console.log(`(deno task sea built the Node single executable for the tests in ${secs(t0)})`);
        for await (const e of Deno.readDir(CACHE)) {
          if (e.isDirectory && e.name.startsWith("sea-") && e.name !== `sea-${hash}`) {
            await Deno.remove(`${CACHE}/${e.name}`, { recursive: true }).catch(() => {});
          }
        }
      }
      return binary;
    } finally {
      await lock.unlock().catch(() => {});
      lock.close();
    }
  })();
  return building;
}

function secs(t0: number): string {
  return `${((performance.now() - t0) / 1000).toFixed(0)} s`;
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/** Whether `deno compile` can get denort here, or why not. */
export type DenortAvailability = { ok: true } | { ok: false; reason: string };

/**
 * Checks DENORT_BIN when set; else compiles a one-line program as `deno compile` would svc, which takes
 * denort from DENO_DIR or downloads it there once. Only a missing runtime (or a bad DENORT_BIN) counts as
 * unavailable: any other failure of that probe is left to the test itself to show.
 */
export async function denortAvailability(): Promise<DenortAvailability> {
  const denort = Deno.env.get("DENORT_BIN");
  try {
    if (denort) {
      await checkDenort(denort);
      return { ok: true };
    }
    return await withTempDir("svc-denort-probe-", async (dir) => {
      await Deno.writeTextFile(`${dir}/probe.ts`, "console.log(1);\n");
      const env = Deno.env.toObject();
      delete env.DENORT_BIN; // deno compile reads an empty one as a path
      const run = await capture(
        Deno.execPath(),
        ["compile", "--no-config", "--no-lock", "--output", `${dir}/probe`, `${dir}/probe.ts`],
        { env, clearEnv: true, timeoutMs: 900_000 },
      );
      if (!run || run.code === 0) return { ok: true };
      const failure = compileFailure(run.stderr, Deno.build.target);
      if (failure instanceof RuntimeUnavailableError) throw failure;
      return { ok: true };
    });
  } catch (e) {
    if (e instanceof BinaryBuildError) return { ok: false, reason: e.message };
    throw e;
  }
}

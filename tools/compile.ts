/**
 * `deno task compile`: the `svc` command as one executable, `dist/svc`, built by `deno compile` on
 * denort (Deno's runtime for compiled programs, without the deno tool's own commands):
 *
 *   deno task compile                            build dist/svc for this machine
 *   deno task compile --output PATH              build PATH instead
 *   deno task compile --target TRIPLE            build for another platform (aarch64-unknown-linux-gnu, ...)
 *   DENORT_BIN=/path/to/denort deno task compile use that denort instead of downloading it
 *
 * `deno compile` downloads denort for the target and the running Deno's version once, into DENO_DIR, or
 * takes the file DENORT_BIN names. This script refuses a DENORT_BIN that is not denort (the deno tool
 * itself would give a binary that is plain Deno, not svc), turns a failed download into one line naming
 * DENORT_BIN, and, for this machine's target, runs the result once: `dist/svc --version` must print svc's
 * version, or the file is removed and the build fails.
 */
import {
  BinaryBuildError,
  capture,
  checkBuiltBinary,
  firstLine,
  fromCaller,
  isFile,
  parseFlags,
  prepareOutput,
  ROOT,
  runBuildTool,
} from "./single_binary.ts";

/**
 * The flags of `deno compile`: `--no-config --no-lock` (the sources name their npm packages in full, so
 * only the packages the command imports are embedded, not every package of deno.json), `--allow-all`.
 */
export const COMPILE_FLAGS: readonly string[] = ["--no-config", "--no-lock", "--allow-all"];
/** Where the binary goes, from the repository root. */
export const DEFAULT_OUTPUT = "dist/svc";
const USAGE = "deno task compile [--output PATH] [--target TRIPLE]";

/** `deno compile` could not get denort (no DENORT_BIN and no download): the one case a test may skip on. */
export class RuntimeUnavailableError extends BinaryBuildError {}

/** The name of denort's release file for a target. */
function denortZip(target: string): string {
  return `denort-${target}.zip`;
}

/** What to set DENORT_BIN to, for messages. */
function denortHint(target: string): string {
  return `set DENORT_BIN to denort ${Deno.version.deno} for ${target} (the file in ${
    denortZip(target)
  } of Deno's release ${Deno.version.deno})`;
}

/**
 * Fails unless `path` is denort. Denort started with nothing embedded exits 1 with "Could not find
 * standalone binary section"; the deno tool prints its version instead. A binary for another target is
 * only checked for existence (it cannot run here).
 */
export async function checkDenort(path: string, target: string = Deno.build.target): Promise<void> {
  if (!(await isFile(path))) {
    throw new BinaryBuildError(`DENORT_BIN=${path}: no such file; ${denortHint(target)}, or unset it`);
  }
  if (target !== Deno.build.target) return;
  const run = await capture(path, ["--version"], { timeoutMs: 30_000 });
  if (!run) {
    throw new BinaryBuildError(`DENORT_BIN=${path} cannot be run (not executable?); ${denortHint(target)}`);
  }
  const printed = run.stdout + "\n" + run.stderr;
  if (run.code !== 0 && /standalone binary section|used internally by 'deno compile'/i.test(printed)) return;
  if (/^deno \d+\.\d+\.\d+/m.test(run.stdout)) {
    throw new BinaryBuildError(
      `DENORT_BIN=${path} is the deno tool ("${firstLine(run.stdout)}"), not denort: ` +
        `a binary built on it would be plain Deno, not svc; ${denortHint(target)}, or unset it to let ` +
        "deno compile download denort",
    );
  }
  throw new BinaryBuildError(
    `DENORT_BIN=${path} is not denort (\`--version\` printed "${
      firstLine(printed) || `nothing, exit ${run.code}`
    }"; denort says it found no standalone binary section); ${denortHint(target)}, or unset it`,
  );
}

/** The one-line error of a failed `deno compile`, from what it printed. */
export function compileFailure(stderr: string, target: string): BinaryBuildError {
  // deno-lint-ignore no-control-regex
  const text = stderr.replace(/\x1b\[[0-9;]*m/g, "").split(/^Stack backtrace:/m)[0];
  if (/Setting up base binary/i.test(text)) {
    const url = /for url \((\S+?)\)/.exec(text)?.[1];
    const causes = [...text.matchAll(/^\s*\d+: (.+)$/gm)].map((m) => m[1].trim());
    const cause = causes.at(-1) ?? firstLine(text.slice(text.indexOf("Setting up base binary")));
    return new RuntimeUnavailableError(
      `deno compile could not get denort, the runtime it builds on${url ? ` (${url})` : ""}: ${cause}; ` +
        `where it cannot be downloaded, ${denortHint(target)}`,
    );
  }
  const error = text.split("\n").find((l) => /^error:/.test(l.trim())) ?? firstLine(text);
  return new BinaryBuildError(`deno compile failed: ${error.trim().replace(/^error:\s*/, "")}`);
}

/**
 * Builds the binary at `output` (a path; relative ones are from the repository root). `env` is added to
 * `deno compile`'s environment (DENORT_BIN, DENO_DIR; an empty value counts as unset). Returns what deno compile listed (the embedded
 * modules and packages, with their sizes).
 */
export async function compileSvc(o: {
  output?: string;
  target?: string;
  env?: Record<string, string>;
  log?: (line: string) => void;
} = {}): Promise<{ output: string; listing: string }> {
  const log = o.log ?? (() => {});
  const target = o.target ?? Deno.build.target;
  const native = target === Deno.build.target;
  // deno compile reads DENORT_BIN even when empty: an empty one is left out of its environment.
  const env: Record<string, string> = { ...Deno.env.toObject(), ...o.env };
  const denort = env.DENORT_BIN;
  if (!denort) delete env.DENORT_BIN;
  if (denort) await checkDenort(denort, target);
  const output = (o.output ?? DEFAULT_OUTPUT).startsWith("/")
    ? o.output!
    : `${ROOT}/${o.output ?? DEFAULT_OUTPUT}`;
  await prepareOutput(output);
  const partial = `${output}.partial-${Deno.pid}`;
  try {
    const args = ["compile", ...COMPILE_FLAGS, "--target", target, "--output", partial, "cli.ts"];
    log(`deno ${args.join(" ").replace(partial, output)}${denort ? ` (DENORT_BIN=${denort})` : ""}`);
    const run = await capture(Deno.execPath(), args, { cwd: ROOT, env, clearEnv: true, timeoutMs: 600_000 });
    if (!run) throw new BinaryBuildError(`cannot run ${Deno.execPath()}`);
    if (run.code !== 0) throw compileFailure(run.stderr || run.stdout, target);
    const listing = (run.stdout + run.stderr).trim();
    if (native) {
      await checkBuiltBinary(partial, denort ? `plain Deno (DENORT_BIN=${denort} is not denort)` : "not svc");
    } else {
      log(`not run: built for ${target}, this machine is ${Deno.build.target}`);
    }
    await Deno.rename(partial, output);
    return { output, listing };
  } finally {
    await Deno.remove(partial).catch(() => {});
  }
}

if (import.meta.main) {
  await runBuildTool(async () => {
    const flags = parseFlags(Deno.args, ["--output", "--target"], USAGE);
    const output = flags.has("--output") ? fromCaller(flags.get("--output")!) : undefined;
    const r = await compileSvc({
      output,
      target: flags.get("--target"),
      log: (line) => console.log(`compile: ${line}`),
    });
    console.log(r.listing);
    const mb = ((await Deno.stat(r.output)).size / 1e6).toFixed(0);
    console.log(`compile: wrote ${r.output} (${mb} MB)`);
  });
}

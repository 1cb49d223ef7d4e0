/**
 * A real PgBouncer in `pool_mode = transaction` in front of the test server, for the pooler tests: Debian's
 * `pgbouncer` run as a child process (as `postgres` with `-u` when this process is root) on a free port, with
 * a configuration and log of its own under /tmp. `stop` ends it (SIGTERM) and deletes the folder.
 */
import { DATABASE_URL } from "./db.ts";
import { closedPort } from "./http.ts";

/** A running PgBouncer. */
export interface PgBouncer {
  /** `postgres://user@127.0.0.1:<port>/<db>`: the test database through the pooler. */
  url: string;
  port: number;
  /** The pooler's log so far. */
  log(): string;
  stop(): Promise<void>;
}

/** Where Debian installs it; null when it is not installed. */
export function pgbouncerBinary(): string | null {
  for (const p of ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* next */ }
  }
  return null;
}

/**
 * Starts PgBouncer in front of `target` (default the test database), transaction mode, `poolSize` server
 * connections per user and database (default 20).
 */
export async function startPgBouncer(
  opts: { target?: string; poolSize?: number } = {},
): Promise<PgBouncer> {
  const bin = pgbouncerBinary();
  if (!bin) throw new Error("pgbouncer is not installed (apt-get install pgbouncer)");
  const target = new URL(opts.target ?? DATABASE_URL);
  const user = decodeURIComponent(target.username || "postgres");
  const database = target.pathname.slice(1) || "postgres";
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "svc_pgbouncer_" });
  await Deno.chmod(dir, 0o777);
  const port = closedPort();
  const ini = [
    "[databases]",
    `${database} = host=${target.hostname} port=${target.port || 5432} user=${user} dbname=${database}` +
    (target.password ? ` password=${decodeURIComponent(target.password)}` : ""),
    // Any other database name (a test's own database) goes to the same server.
    `* = host=${target.hostname} port=${target.port || 5432} user=${user}` +
    (target.password ? ` password=${decodeURIComponent(target.password)}` : ""),
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = any",
    "pool_mode = transaction",
    `default_pool_size = ${opts.poolSize ?? 20}`,
    "max_client_conn = 1000",
    "ignore_startup_parameters = extra_float_digits",
    `logfile = ${dir}/pgbouncer.log`,
    "log_connections = 0",
    "log_disconnections = 0",
  ].join("\n") + "\n";
  await Deno.writeTextFile(`${dir}/pgbouncer.ini`, ini);
  await Deno.chmod(`${dir}/pgbouncer.ini`, 0o644);
  const args = Deno.uid() === 0 ? ["-u", "postgres", `${dir}/pgbouncer.ini`] : [`${dir}/pgbouncer.ini`];
  const child = new Deno.Command(bin, { args, stdout: "null", stderr: "piped" }).spawn();
  const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let errText = "";
  (async () => {
    for (;;) {
      const r = await stderr.read().catch(() => ({ done: true, value: "" }));
      if (r.done) break;
      errText += r.value;
    }
  })();
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  const log = () => {
    try {
      return Deno.readTextFileSync(`${dir}/pgbouncer.log`);
    } catch {
      return "";
    }
  };
  const stop = async () => {
    if (!exited) {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
    }
    await status;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  // Up when it accepts a connection.
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      break;
    } catch {
      if (exited || Date.now() > until) {
        await stop();
        throw new Error(`pgbouncer did not start: ${errText}${log()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`,
    port,
    log,
    stop,
  };
}

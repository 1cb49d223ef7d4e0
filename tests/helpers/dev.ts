/** Helpers for the `svc dev` tests: a running `svc dev` process and its printed DATABASE_URL. */
import postgres from "postgres";
import type { Proc } from "./process.ts";

/** No database URL and no schema from the environment: `svc dev` starts its embedded PostgreSQL. */
export const EMBEDDED = { DATABASE_URL: "", SERVICE_SCHEMA: "", NO_COLOR: "1" };

/** A running `svc dev`: its process, UI address and printed DATABASE_URL (embedded only). */
export interface DevRun {
  proc: Proc;
  url: string;
  databaseUrl?: string;
}

/** Waits for the UI line of a `svc dev` process (killing it when the line does not come). */
export async function devUp(proc: Proc): Promise<DevRun> {
  try {
    const line = await proc.waitLine(/^svc dev: open http:\/\//, 120_000);
    const db = proc.lines.find((l) => l.startsWith("DATABASE_URL="));
    return {
      proc,
      url: /open (http:\/\/\S+\/)/.exec(line)![1],
      databaseUrl: db?.slice("DATABASE_URL=".length),
    };
  } catch (e) {
    await proc.kill("SIGKILL");
    throw e;
  }
}

/** Whether a PostgreSQL answers on `url`. */
export async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/** A folder for a `svc dev` data directory; as root the server runs as another user, which must enter it. */
export async function devTempDir(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  await Deno.chmod(dir, 0o755);
  return dir;
}

/**
 * Stops a server a killed `svc dev` left running on `dataDir` (after a failed test, before its folder
 * is removed).
 */
export async function stopLeftoverServer(dataDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number((await Deno.readTextFile(`${dataDir}/pg/postmaster.pid`)).split("\n")[0]);
  } catch {
    return;
  }
  const alive = () => {
    try {
      Deno.kill(pid, "SIGCONT"); // no effect: only whether the process exists
      return true;
    } catch {
      return false;
    }
  };
  if (!(pid > 0) || !alive()) return;
  try {
    Deno.kill(pid, "SIGQUIT");
  } catch { /* gone */ }
  const until = Date.now() + 10_000;
  while (alive() && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}

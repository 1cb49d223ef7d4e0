/**
 * Shared helpers of the benchmark harness: statistics, databases, PostgreSQL statistics and WAL.
 *
 * The harness talks to PostgreSQL through postgres.js (the project's own driver) on connections of
 * its own, never through a system's pool, so its bookkeeping queries are the same for every system.
 */
import postgres from "postgres";
import process from "node:process";
import { readFileSync } from "node:fs";

export type Sql = ReturnType<typeof postgres>;

/** Admin URL (a database the harness may CREATE/DROP DATABASE from). */
export const ADMIN_URL = process.env.BENCH_DATABASE_URL ??
  "postgres://postgres@127.0.0.1:5432/postgres";

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Monotonic milliseconds (shared clock for enqueue and handler timestamps inside one process). */
export const now = (): number => performance.now();

/** URL of another database on the same server as ADMIN_URL. */
export function dbUrl(name: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = "/" + name;
  return u.toString();
}

/** A small connection of the harness's own (never more than 2 sockets). */
export function harnessSql(url: string): Sql {
  return postgres(url, {
    max: 2,
    onnotice: () => {},
    idle_timeout: 0,
    connection: { application_name: "bench-harness" },
  });
}

/** CREATE DATABASE for one phase; returns its URL. Names start with bench_ and carry the pid. */
export async function createDatabase(label: string): Promise<{ name: string; url: string }> {
  const name = `bench_${label}_${process.pid}`.toLowerCase().replace(/[^a-z0-9_]/g, "_");
  const sql = harnessSql(ADMIN_URL);
  try {
    await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await sql.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await sql.end({ timeout: 5 });
  }
  return { name, url: dbUrl(name) };
}

export async function dropDatabase(name: string): Promise<void> {
  const sql = harnessSql(ADMIN_URL);
  try {
    await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * CPU time (user + system, in seconds) of the backends serving the harness connection's database, by pid
 * (the harness's own backends left out), read from /proc/<pid>/stat. A backend that exits between two reads
 * loses its time; one that starts after the first read counts from 0.
 */
export async function backendCpu(sql: Sql): Promise<Map<number, number>> {
  const rows = await sql<{ pid: number }[]>`
    select pid from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid() and application_name <> 'bench-harness'`;
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    const s = cpuOfPid(pid);
    if (s !== null) out.set(pid, s);
  }
  return out;
}

/** utime + stime of a process in seconds (clock ticks of 1/100 s, Linux's USER_HZ), or null. */
function cpuOfPid(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at state, field 3; utime is 14, stime 15.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

/** Seconds of backend CPU between two `backendCpu` reads (backends new in `after` count from 0). */
export function backendCpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return s;
}

/** Nearest-rank percentile of an unsorted sample. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function summarize(values: number[]): Summary | null {
  const v = values.filter((x) => Number.isFinite(x));
  if (v.length === 0) return null;
  const s = [...v].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], max: s[s.length - 1], n: s.length };
}

/**
 * Waits until no backend other than the harness's own is connected to `dbName`, so that the
 * system's backends have exited (a backend flushes its pending table statistics when it exits).
 */
export async function waitForBackendsGone(sql: Sql, dbName: string, timeoutMs = 10_000): Promise<void> {
  const until = now() + timeoutMs;
  while (now() < until) {
    const [{ n }] = await sql`
      select count(*)::int as n from pg_stat_activity
      where datname = ${dbName} and pid <> pg_backend_pid() and application_name <> 'bench-harness'`;
    if (n === 0) return;
    await sleep(25);
  }
}

/**
 * Dead tuples on the system's tables (every table in its schemas), read from pg_stat_user_tables
 * once the statistics are current: own pending stats flushed with pg_stat_force_next_flush(), the
 * snapshot cleared, and the figure read until two reads 150 ms apart agree.
 */
export async function deadTuples(
  sql: Sql,
  schemas: string[],
): Promise<{ dead: number; live: number; tables: Record<string, number> }> {
  let last = -1;
  for (let i = 0; i < 20; i++) {
    await sql`select pg_stat_force_next_flush()`;
    await sql`select pg_stat_clear_snapshot()`;
    const rows = await sql<{ rel: string; dead: number; live: number }[]>`
      select schemaname || '.' || relname as rel, n_dead_tup::int8::float8 as dead, n_live_tup::int8::float8 as live
      from pg_stat_user_tables where schemaname = any(${schemas})`;
    const dead = rows.reduce((a, r) => a + Number(r.dead), 0);
    const live = rows.reduce((a, r) => a + Number(r.live), 0);
    if (dead === last) {
      const tables: Record<string, number> = {};
      for (const r of rows) if (Number(r.dead) > 0) tables[r.rel] = Number(r.dead);
      return { dead, live, tables };
    }
    last = dead;
    await sleep(150);
  }
  throw new Error("pg_stat_user_tables did not settle");
}

/**
 * Tuple writes (inserts + updates + deletes) over every table of the connection's database, catalogs and
 * TOAST included (pg_stat_all_tables), once the statistics are current (read until two reads agree).
 */
export async function tupleWrites(sql: Sql): Promise<number> {
  let last = -1;
  for (let i = 0; i < 20; i++) {
    await sql`select pg_stat_force_next_flush()`;
    await sql`select pg_stat_clear_snapshot()`;
    const [{ w }] = await sql<{ w: number }[]>`
      select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::float8 as w from pg_stat_all_tables`;
    if (Number(w) === last) return last;
    last = Number(w);
    await sleep(150);
  }
  throw new Error("pg_stat_all_tables did not settle");
}

export async function currentLsn(sql: Sql): Promise<string> {
  const [{ lsn }] = await sql`select pg_current_wal_lsn()::text as lsn`;
  return lsn;
}

export async function lsnDiff(sql: Sql, after: string, before: string): Promise<number> {
  const [{ d }] = await sql`select pg_wal_lsn_diff(${after}::pg_lsn, ${before}::pg_lsn)::float8 as d`;
  return Number(d);
}

/**
 * WAL written for this database alone between two LSNs, read back with pg_walinspect: the records
 * whose block references name a relation of this database, plus the other records (commits) of
 * the same transactions. Other databases' traffic on the shared server (tests run in parallel
 * here) is left out, which the plain LSN difference cannot do. Returns null when pg_walinspect is
 * not available.
 */
export async function walBytesForDatabase(sql: Sql, before: string, after: string): Promise<number | null> {
  try {
    // pg_walinspect reads flushed WAL only: wait (the WAL writer flushes every 200 ms) for `after`.
    for (let i = 0; i < 50; i++) {
      const [{ ok }] = await sql`select pg_current_wal_flush_lsn() >= ${after}::pg_lsn as ok`;
      if (ok) break;
      await sleep(50);
    }
    const [{ oid }] =
      await sql`select oid::int8::text as oid from pg_database where datname = current_database()`;
    const pattern = `rel [0-9]+/${oid}/`;
    const [{ b }] = await sql`
      with r as (select xid, record_length, block_ref from pg_get_wal_records_info(${before}::pg_lsn, ${after}::pg_lsn)),
           x as (select distinct xid from r where block_ref ~ ${pattern} and xid::text <> '0')
      select coalesce(sum(record_length), 0)::float8 as b from r
      where block_ref ~ ${pattern} or xid in (select xid from x)`;
    return Number(b);
  } catch (e) {
    console.error(`  (pg_walinspect unavailable: ${(e as Error).message})`);
    return null;
  }
}

/** Enables pg_walinspect in the bench database when possible (before the measured window). */
export async function enableWalInspect(sql: Sql): Promise<boolean> {
  try {
    await sql`create extension if not exists pg_walinspect`;
    return true;
  } catch {
    return false;
  }
}

/** Facts about the machine and the server for the results file. */
export async function machineFacts(): Promise<Record<string, string>> {
  const facts: Record<string, string> = {};
  facts["cores (nproc)"] = await cmd(["nproc"]).catch(() => String(navigator.hardwareConcurrency));
  const cpu = await Deno.readTextFile("/proc/cpuinfo").then((t) =>
    t.match(/model name\s*:\s*(.*)/)?.[1] ?? ""
  )
    .catch(() => "");
  if (cpu) facts["cpu"] = cpu;
  const mem = Deno.systemMemoryInfo();
  facts["memory"] = `${(mem.total / 2 ** 30).toFixed(1)} GiB`;
  facts["os"] = `${Deno.build.os} ${Deno.build.arch}, kernel ${Deno.osRelease()}`;
  facts["deno"] = `${Deno.version.deno} (V8 ${Deno.version.v8})`;
  facts["load average at start (1/5/15 min)"] = await loadAverage();
  const head = await cmd(["git", "rev-parse", "--short", "HEAD"]).catch(() => "unknown");
  const dirty = await cmd(["git", "status", "--porcelain", "--", "mod.ts", "src", "migrations", "sql"])
    .then((t) => t.split("\n").filter(Boolean).length).catch(() => 0);
  facts["svc code"] = `commit ${head}` +
    (dirty
      ? ` plus ${dirty} uncommitted change(s) under mod.ts/src/migrations/sql (the working tree is what ran)`
      : "");
  facts["node on PATH"] = await cmd(["node", "--version"]).catch(() => "none");
  const sql = harnessSql(ADMIN_URL);
  try {
    const [{ v }] = await sql`select version() as v`;
    facts["postgresql"] = v;
    const settings = await sql<{ name: string; setting: string; unit: string | null; source: string }[]>`
      select name, setting, unit, source from pg_settings
      where source not in ('default', 'override') order by name`;
    facts["non-default settings"] = settings
      .filter((s) => s.source !== "client" && s.source !== "session")
      .map((s) => `${s.name}=${s.setting}${s.unit ? " " + s.unit : ""}`).join(", ");
    const [{ n }] =
      await sql`select count(*)::int as n from pg_stat_activity where backend_type = 'client backend'`;
    facts["client backends at start"] = String(n);
  } finally {
    await sql.end({ timeout: 5 });
  }
  return facts;
}

async function cmd(argv: string[]): Promise<string> {
  const out = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "null" })
    .output();
  if (!out.success) throw new Error(argv.join(" ") + " failed");
  return new TextDecoder().decode(out.stdout).trim();
}

/** /proc/loadavg's three averages: a busy shared machine shows here. */
export async function loadAverage(): Promise<string> {
  const t = await Deno.readTextFile("/proc/loadavg").catch(() => "");
  return t.split(" ").slice(0, 3).join(" / ") || "unknown";
}

/**
 * The test command (`deno task test`): runs the test files under tests/ in parallel and ends with the
 * line `N passed, N failed` that CI reads. Its first line says which PostgreSQL the run uses:
 * TEST_DATABASE_URL when set; else the server on 127.0.0.1:5432 when one answers; else (or with
 * `--embedded`) an embedded PostgreSQL 18 from npm, started for the run and stopped at its end
 * (`--embedded` also gives the restart tests' throw-away clusters the embedded binaries). `--pooler` puts a
 * real PgBouncer in transaction mode (tests/helpers/pgbouncer.ts) in front of that database for the run:
 * the tests get its URL and SERVICE_POOLER=transaction.
 *
 * Storage engines: the files that touch storage behaviour run once per engine (`queue_storage`, then
 * `canonical`); the files listed in `ONCE` (pure, packaging, CLI-parsing, docs, browser and type tests)
 * run once, in the queue_storage pass. SVC_TEST_ENGINE or `--engine NAME` runs one engine (every file in
 * it). The last line adds up the passes.
 *
 * Each pass hands the tests migrated schemas from a pool (tests/helpers/schema_pool.ts: reset and reused
 * instead of migrated and dropped per test) and vacuums the system catalogs the tests churn every minute.
 *
 * Other arguments are passed to `deno test` (e.g. a file or `--filter name`).
 *
 * The steps are separate functions: `chooseDatabase`, `filesOf`/`passesOf` (which files run on which
 * engine) and `runDenoTest` (one `deno test` with an environment of its own, its passed/failed counts
 * parsed), so that a run can call `deno test` more than once on one database and add up the counts.
 */
import postgres from "postgres";
import { startEmbeddedPostgres } from "../src/dev/embedded_postgres.ts";
import { type PgBouncer, startPgBouncer } from "./helpers/pgbouncer.ts";
import { createSchemaPool, dropSchemaPool } from "./helpers/schema_pool.ts";

const LOCAL_URL = "postgres://postgres@127.0.0.1:5432/postgres";
/** The configuration of the tests, the benchmark and the build tools (their npm packages and lock file). */
const CONTRIB_CONFIG = new URL("../deno.contrib.json", import.meta.url).pathname;

/** The database of a test run. */
export interface TestDatabase {
  url: string;
  /** One line: which server, and why this one. */
  description: string;
  /** Stops what the run started (nothing for a server of its own). */
  stop(): Promise<void>;
}

/**
 * TEST_DATABASE_URL, else the local server when it answers, else an embedded server started now
 * (always with `embedded`). `announce` gets the first line before anything starts.
 */
export async function chooseDatabase(
  opts: { embedded?: boolean; announce?: (line: string) => void } = {},
): Promise<TestDatabase> {
  const announce = opts.announce ?? ((line: string) => console.log(line));
  const given = Deno.env.get("TEST_DATABASE_URL");
  if (!opts.embedded) {
    if (given) {
      const version = await serverVersion(given);
      const description = `tests: on PostgreSQL ${version ?? "(not answering yet)"} at ${hostOf(given)} ` +
        "(TEST_DATABASE_URL)";
      announce(description);
      return { url: given, description, stop: () => Promise.resolve() };
    }
    const version = await serverVersion(LOCAL_URL);
    if (version) {
      const description = `tests: on PostgreSQL ${version} at 127.0.0.1:5432 (TEST_DATABASE_URL is unset)`;
      announce(description);
      return { url: LOCAL_URL, description, stop: () => Promise.resolve() };
    }
  }
  announce(
    `tests: on an embedded PostgreSQL started for this run (${
      opts.embedded ? "--embedded" : "TEST_DATABASE_URL is unset and nothing answers on 127.0.0.1:5432"
    })`,
  );
  const root = await Deno.makeTempDir({ prefix: "svc-test-pg-" });
  await Deno.chmod(root, 0o755); // as root, the server runs as another user, which must enter it
  try {
    const pg = await startEmbeddedPostgres({
      root,
      noSync: true,
      // Throw-away data: no durability; room for the parallel test files' pools.
      settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off", max_connections: 200 },
      log: (line) => console.log(`tests: ${line}`),
    });
    return {
      url: pg.url,
      description: `tests: on the embedded PostgreSQL ${pg.version} at ${pg.url}`,
      async stop() {
        try {
          await pg.stop();
        } finally {
          await Deno.remove(root, { recursive: true }).catch(() => {});
        }
      },
    };
  } catch (e) {
    await Deno.remove(root, { recursive: true }).catch(() => {});
    throw e;
  }
}

/** The server's version, or null when nothing answers. */
async function serverVersion(url: string): Promise<string | null> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    const [r] = await sql`show server_version`;
    return String(r.server_version).split(" ")[0];
  } catch {
    return null;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

function hostOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}`;
  } catch {
    return "the given URL";
  }
}

/** The outcome of one `deno test`. */
export interface TestRun {
  passed: number;
  failed: number;
  /** The exit code of `deno test` (1 when the deadline killed it). */
  code: number;
  timedOut: boolean;
}

/**
 * Runs `deno test -A --config deno.contrib.json --parallel <args>` with `env` on top of this process's,
 * its output streamed through; a watchdog kills it at `deadline` (ms since the epoch), so that a hung test fails CI long
 * before its own limit, with the counts still printed. `onChild` gets the process (to stop it on a
 * signal).
 */
export async function runDenoTest(
  args: string[],
  env: Record<string, string>,
  deadline: number,
  onChild: (child: Deno.ChildProcess | null) => void = () => {},
): Promise<TestRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--config", CONTRIB_CONFIG, "--parallel", ...(args.length ? args : ["tests/"])],
    stdout: "piped",
    stderr: "inherit",
    env: { DENO_JOBS: Deno.env.get("DENO_JOBS") ?? "3", NO_COLOR: "1", ...env },
  }).spawn();
  onChild(child);
  let timedOut = false;
  const watchdog = setTimeout(() => {
    timedOut = true;
    console.error(`error: the test run went past its time limit; stopping it`);
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, Math.max(0, deadline - Date.now()));
  let tail = "";
  const decoder = new TextDecoder();
  for await (const chunk of child.stdout) {
    await Deno.stdout.write(chunk);
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4000);
  }
  const status = await child.status;
  clearTimeout(watchdog);
  onChild(null);
  const m = /(?:ok|FAILED)\s*\|\s*(\d+) passed(?: \((\d+) steps?\))?\s*\|\s*(\d+) failed/.exec(tail);
  return {
    passed: m ? Number(m[1]) : 0,
    failed: (m ? Number(m[3]) : (status.success ? 0 : 1)) + (timedOut ? 1 : 0),
    code: timedOut ? 1 : status.code,
    timedOut,
  };
}

/**
 * The system catalogs that a run churns: every test schema creates about 220 relations and 120 functions
 * and drops them again, and a server with autovacuum off (this machine's, CI's) keeps every dead catalog row.
 * After one engine's pass pg_attribute held 2.2 million dead rows (467 MB) and a migrate took twice the
 * server CPU it takes on clean catalogs (0.6-0.95 s against 0.3-0.45 s).
 */
const CHURNED_CATALOGS = [
  "pg_attribute",
  "pg_depend",
  "pg_class",
  "pg_index",
  "pg_type",
  "pg_attrdef",
  "pg_inherits",
  "pg_proc",
  "pg_constraint",
  "pg_namespace",
  "pg_trigger",
  "pg_rewrite",
  "pg_sequence",
  "pg_statistic",
  "pg_partitioned_table",
  "pg_init_privs",
  "pg_description",
  "pg_enum",
  "pg_shdepend",
].map((t) => `pg_catalog.${t}`);

/**
 * Vacuums the churned catalogs of `url` now and every `everyMs` until stopped (a vacuum still running is not
 * started again). Only the catalogs: the tests' own tables, some of which tests count dead rows in, are left
 * alone. A role that may not vacuum them gets a warning from the server and the run goes on.
 */
export function vacuumCatalogs(url: string, everyMs: number): { stop(): Promise<void> } {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  const once = () => {
    if (busy) return;
    busy = true;
    running = sql.unsafe(`vacuum ${CHURNED_CATALOGS.join(", ")}`)
      .catch((e) => console.error(`tests: vacuum of the catalogs failed: ${(e as Error).message}`))
      .finally(() => busy = false);
  };
  once();
  const timer = setInterval(once, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
      await sql.end({ timeout: 5 }).catch(() => {});
    },
  };
}

type Engine = "canonical" | "queue_storage";

/** The engines a run covers: `--engine NAME`, else SVC_TEST_ENGINE, else both (queue_storage first). */
function enginesOf(args: string[]): Engine[] {
  const i = args.indexOf("--engine");
  const one = i >= 0 ? args[i + 1] : Deno.env.get("SVC_TEST_ENGINE");
  if (one === undefined) return ["queue_storage", "canonical"];
  if (one !== "canonical" && one !== "queue_storage") {
    console.error(`error: --engine must be canonical or queue_storage, got ${JSON.stringify(one)}`);
    Deno.exit(2);
  }
  return [one];
}

/**
 * The test files and folders that run once (in the queue_storage pass, or in the only pass of a
 * one-engine run): they do not touch storage behaviour, so a second engine adds nothing. Every other
 * test file runs on both engines; a new file does too unless it is listed here.
 */
export const ONCE: readonly string[] = [
  "tests/contract/", // callback URLs and signatures: pure
  "tests/cron/schedule_test.ts", // cron expressions: pure
  "tests/db/", // the batcher and the vendored driver on scripted sockets: no database
  "tests/dev/", // svc dev: its own embedded server, or a schema it migrates with the default engine
  "tests/docs/", // the docs' snippets and examples
  "tests/packaging/", // install forms and builds
  "tests/platform/", // the Deno/Node shim
  "tests/types/", // type tests
  "tests/ui/", // the browser tests of the admin UI
  "tests/unit/", // dispatcher, executor and completer on a fake engine
  "tests/testing/run_handler_test.ts", // runHandler: no database
  "tests/http/errors_test.ts", // the error-to-status mapping: pure
  "tests/http/serve_cli_test.ts", // svc serve's flags, startup line and signals
  "tests/http/serve_security_test.ts", // Origin and token checks in front of the admin API
  "tests/cli/consistency_test.ts", // CLI usage errors and exit codes
  "tests/cli/connect_deadline_test.ts", // connect deadlines against a server that is not PostgreSQL
  "tests/worker/json_logs_test.ts", // the logger's JSON lines
  "tests/worker/readyz_postgres_down_test.ts", // /readyz while a throw-away cluster is down
];

const TEST_FILE = /(^|[_.])test\.(ts|tsx|mts|js|mjs|jsx)$/;

/** The test files under `path` (a file or a folder), sorted, as paths relative to the repository. */
async function testFilesUnder(path: string): Promise<string[]> {
  const info = await Deno.stat(path);
  if (info.isFile) return [path];
  const out: string[] = [];
  for await (const e of Deno.readDir(path)) {
    const p = `${path.replace(/\/$/, "")}/${e.name}`;
    if (e.isDirectory) out.push(...await testFilesUnder(p));
    else if (e.isFile && TEST_FILE.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** Whether `file` is (under) an entry of ONCE. */
export function runsOnce(file: string): boolean {
  const f = file.replace(/^\.\//, "");
  return ONCE.some((o) => (o.endsWith("/") ? f.startsWith(o) : f === o));
}

/**
 * Splits `deno test` arguments into the files they name (folders expanded to their test files; none
 * given means tests/) and the other arguments (flags, and the value after `--filter`).
 */
export async function filesOf(args: string[]): Promise<{ files: string[]; rest: string[] }> {
  const files: string[] = [];
  const rest: string[] = [];
  let named = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const isValue = i > 0 && /^--(filter|shuffle|seed|reporter|junit-path|coverage)$/.test(args[i - 1]);
    if (!a.startsWith("-") && !isValue && await Deno.stat(a).then(() => true, () => false)) {
      named = true;
      files.push(...await testFilesUnder(a.replace(/^\.\//, "")));
    } else rest.push(a);
  }
  if (!named) files.push(...await testFilesUnder("tests"));
  return { files: [...new Set(files)], rest };
}

/** The passes of a run: each engine with its files (the ONCE files only in the first). */
export function passesOf(engines: Engine[], files: string[]): { engine: Engine; files: string[] }[] {
  return engines.map((engine, i) => ({ engine, files: i === 0 ? files : files.filter((f) => !runsOnce(f)) }));
}

if (import.meta.main) {
  const embedded = Deno.args.includes("--embedded");
  // --pooler: the tests reach the database through a real PgBouncer in transaction mode.
  const pooled = Deno.args.includes("--pooler");
  const engines = enginesOf(Deno.args);
  const args = Deno.args.filter((a, i, all) =>
    a !== "--embedded" && a !== "--pooler" && a !== "--engine" && all[i - 1] !== "--engine"
  );
  // A normal run takes about 12 minutes here; on a machine where every wake-up costs milliseconds one pass took
  // 40 (2026-11-28). The watchdog is for a hung test, and still fires well inside CI's 90 minutes.
  const limitMs = Number(Deno.env.get("SVC_TEST_TIMEOUT_MS") ?? 65 * 60_000);
  const deadline = Date.now() + limitMs;

  let db: TestDatabase | undefined;
  let bouncer: PgBouncer | undefined;
  let child: Deno.ChildProcess | null = null;
  let pool: string | undefined;
  // Ctrl-C: the tests get it from the terminal; the embedded server (a session of its own) is stopped here.
  const onSignal = async () => {
    try {
      child?.kill("SIGKILL");
    } catch { /* gone */ }
    if (db && pool) await dropSchemaPool(db.url, pool).catch(() => {});
    await bouncer?.stop().catch(() => {});
    await db?.stop().catch(() => {});
    console.log("0 passed, 1 failed");
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);

  const total: TestRun = { passed: 0, failed: 0, code: 0, timedOut: false };
  try {
    db = await chooseDatabase({ embedded });
    // --embedded: the throw-away clusters of restart tests use the embedded binaries too.
    const env: Record<string, string> = { TEST_DATABASE_URL: db.url };
    if (embedded) env.SVC_TEST_PG_BINARIES = "embedded";
    if (pooled) {
      bouncer = await startPgBouncer({ target: db.url, poolSize: 40 });
      console.log(`tests: through PgBouncer (transaction mode) at ${bouncer.url} (--pooler)`);
      // Every client, worker and svc command of the tests takes the pooled URL and is told so.
      Object.assign(env, { TEST_DATABASE_URL: bouncer.url, SERVICE_POOLER: "transaction" });
    }
    const missing = [];
    for (const o of ONCE) if (!await Deno.stat(o).then(() => true, () => false)) missing.push(o);
    if (missing.length) {
      throw new Error(`tests/run.ts: ONCE lists what does not exist: ${missing.join(", ")}`);
    }
    const { files, rest } = await filesOf(args);
    for (const { engine, files: these } of passesOf(engines, files)) {
      if (these.length === 0) {
        console.log(`tests: storage engine ${engine}: nothing to run (the files given run once)`);
        continue;
      }
      console.log(`tests: storage engine ${engine}: ${these.length} files`);
      const passStart = performance.now();
      const vacuum = vacuumCatalogs(db.url, 60_000);
      // Migrated schemas handed out and reset (tests/helpers/schema_pool.ts), dropped when the pass ends.
      pool = await createSchemaPool(db.url);
      const run = await runDenoTest(
        [...rest, ...these],
        { ...env, SVC_TEST_ENGINE: engine, SVC_TEST_SCHEMA_POOL: pool },
        deadline,
        (c) => child = c,
      ).finally(async () => {
        await dropSchemaPool(db!.url, pool!).then(
          (line) => console.log(`tests: ${engine}: ${line}`),
          (e) => console.error(`error: dropping the pool's schemas: ${(e as Error).message}`),
        );
        pool = undefined;
        await vacuum.stop();
      });
      console.log(`tests: ${engine}: ${run.passed} passed, ${run.failed} failed`);
      console.log(`tests: ${engine}: the pass took ${Math.round((performance.now() - passStart) / 1000)} s`);
      total.passed += run.passed;
      total.failed += run.failed;
      if (run.code !== 0) total.code = run.code;
      if (run.timedOut) break;
    }
  } catch (e) {
    console.error(`error: ${(e as Error).message}`);
    total.failed += 1;
    total.code = 1;
  } finally {
    await bouncer?.stop().catch((e) => console.error(`error: stopping PgBouncer: ${e.message}`));
    await db?.stop().catch((e) => console.error(`error: stopping the test database: ${e.message}`));
  }
  console.log(`${total.passed} passed, ${total.failed} failed`);
  Deno.exit(total.code === 0 && total.failed > 0 ? 1 : total.code);
}

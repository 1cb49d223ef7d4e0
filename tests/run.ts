/**
 * The test command (`deno task test`): runs every test file under tests/ in parallel and ends with the
 * line `N passed, N failed` that CI reads. Its first line says which PostgreSQL the run uses:
 * TEST_DATABASE_URL when set; else the server on 127.0.0.1:5432 when one answers; else (or with
 * `--embedded`) an embedded PostgreSQL 18 from npm, started for the run and stopped at its end
 * (`--embedded` also gives the restart tests' throw-away clusters the embedded binaries).
 * The suite runs once per storage engine (`canonical`, then `queue_storage`), each test schema
 * migrated to that engine; SVC_TEST_ENGINE or `--engine NAME` runs one. The last line adds up the runs.
 * Other arguments are passed to `deno test` (e.g. a file or `--filter name`).
 *
 * The two steps are separate functions: `chooseDatabase` and `runDenoTest` (one `deno test` with an
 * environment of its own, its passed/failed counts parsed), so that a run can call `deno test` more
 * than once on one database and add up the counts.
 */
import postgres from "postgres";
import { startEmbeddedPostgres } from "../src/dev/embedded_postgres.ts";

const LOCAL_URL = "postgres://postgres@127.0.0.1:5432/postgres";

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
 * Runs `deno test -A --parallel <args>` with `env` on top of this process's, its output streamed
 * through; a watchdog kills it at `deadline` (ms since the epoch), so that a hung test fails CI long
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
    args: ["test", "-A", "--parallel", ...(args.length ? args : ["tests/"])],
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

/** The engines a run covers: `--engine NAME`, else SVC_TEST_ENGINE, else both. */
function enginesOf(args: string[]): string[] {
  const i = args.indexOf("--engine");
  const one = i >= 0 ? args[i + 1] : Deno.env.get("SVC_TEST_ENGINE");
  if (one === undefined) return ["canonical", "queue_storage"];
  if (one !== "canonical" && one !== "queue_storage") {
    console.error(`error: --engine must be canonical or queue_storage, got ${JSON.stringify(one)}`);
    Deno.exit(2);
  }
  return [one];
}

if (import.meta.main) {
  const embedded = Deno.args.includes("--embedded");
  const engines = enginesOf(Deno.args);
  const args = Deno.args.filter((a, i, all) =>
    a !== "--embedded" && a !== "--engine" && all[i - 1] !== "--engine"
  );
  const limitMs = Number(Deno.env.get("SVC_TEST_TIMEOUT_MS") ?? 40 * 60_000);
  const deadline = Date.now() + limitMs;

  let db: TestDatabase | undefined;
  let child: Deno.ChildProcess | null = null;
  // Ctrl-C: the tests get it from the terminal; the embedded server (a session of its own) is stopped here.
  const onSignal = async () => {
    try {
      child?.kill("SIGKILL");
    } catch { /* gone */ }
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
    for (const engine of engines) {
      console.log(`tests: storage engine ${engine}`);
      const run = await runDenoTest(args, { ...env, SVC_TEST_ENGINE: engine }, deadline, (c) => child = c);
      console.log(`tests: ${engine}: ${run.passed} passed, ${run.failed} failed`);
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
    await db?.stop().catch((e) => console.error(`error: stopping the test database: ${e.message}`));
  }
  console.log(`${total.passed} passed, ${total.failed} failed`);
  Deno.exit(total.code === 0 && total.failed > 0 ? 1 : total.code);
}

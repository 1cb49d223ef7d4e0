/** Test helpers: each test gets its own schema in the shared database and drops it afterwards. */
import postgres from "postgres";
import { type Client, type ClientOptions, createClient } from "../../src/client/client.ts";
import { givePooledSchemaBack, registerPooledSchema, SCHEMA_POOL, takePooledSchema } from "./schema_pool.ts";

/** The test database (env TEST_DATABASE_URL, else the local server). */
export const DATABASE_URL: string = Deno.env.get("TEST_DATABASE_URL") ??
  "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Whether DATABASE_URL goes through a transaction pooler (the runner's `--pooler` pass sets
 * SERVICE_POOLER=transaction): plain postgres.js connections of the tests then send unnamed statements.
 */
export const POOLED: boolean = Deno.env.get("SERVICE_POOLER") === "transaction";

/** The storage engine of every test schema: env SVC_TEST_ENGINE (`canonical` or `queue_storage`, the default). */
export const TEST_ENGINE: "canonical" | "queue_storage" =
  (Deno.env.get("SVC_TEST_ENGINE") ?? "queue_storage") === "canonical" ? "canonical" : "queue_storage";

/** A fresh schema name. */
export function freshSchema(prefix = "t"): string {
  return `svct_${prefix}_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

/** Options of `testClient` and `withSchema` beyond the client's. */
export interface TestSchemaOptions {
  /**
   * A schema migrated for this test alone, never one of the run's pool (tests/helpers/schema_pool.ts): for a
   * test that reads the server's statistics of its tables (analyze times, scan counts), which a reset
   * does not clear.
   */
  fresh?: boolean;
}

/**
 * A migrated client on a schema of its own; `drop` removes the schema and closes the client. Under the test
 * runner the schema comes from the pass's pool of migrated schemas and `drop` resets it and gives it back
 * (unless `schema` or `fresh` is given); either way the test sees a schema exactly as `migrate` leaves it.
 */
export async function testClient(
  opts: Partial<ClientOptions> & TestSchemaOptions = {},
): Promise<{ client: Client; schema: string; drop: () => Promise<void> }> {
  const { fresh, ...clientOpts } = opts;
  const usePool = SCHEMA_POOL !== undefined && !fresh && clientOpts.schema === undefined;
  const taken = usePool ? await takePooledSchema(DATABASE_URL, POOLED, TEST_ENGINE) : null;
  const schema = taken ?? clientOpts.schema ?? freshSchema();
  const client = createClient({ databaseUrl: DATABASE_URL, maxConnections: 4, ...clientOpts, schema });
  if (!taken) {
    try {
      await client.migrate({ engine: TEST_ENGINE });
      if (usePool) await registerPooledSchema(DATABASE_URL, POOLED, schema, TEST_ENGINE);
    } catch (e) {
      await client.close().catch(() => {});
      await dropSchema(schema).catch(() => {});
      throw e;
    }
  }
  return {
    client,
    schema,
    drop: usePool
      ? async () => {
        await client.close();
        await givePooledSchemaBack(DATABASE_URL, POOLED, schema, dropSchema);
      }
      : async () => {
        await dropSchema(schema);
        await client.close();
      },
  };
}

/**
 * Runs `body` with a migrated client on a fresh schema (`opts` as for `testClient`) and a plain
 * postgres.js connection of its own (`sqlMax` connections, default 1); drops both afterwards.
 */
export async function withSchema(
  body: (client: Client, schema: string, sql: postgres.Sql) => Promise<void>,
  opts: Partial<ClientOptions> & TestSchemaOptions & { sqlMax?: number } = {},
): Promise<void> {
  const { sqlMax, ...clientOpts } = opts;
  const { client, schema, drop } = await testClient(clientOpts);
  const sql = postgres(DATABASE_URL, { max: sqlMax ?? 1, onnotice: () => {}, prepare: !POOLED });
  try {
    await body(client, schema, sql);
  } finally {
    await sql.end();
    await drop();
  }
}

/**
 * Runs `fn` on a canonical database (the older line's engine, as `svc migrate --engine canonical` leaves it)
 * on a fresh schema of its own, whatever the pass's engine; drops it afterwards.
 */
export async function canonicalDb(fn: (client: Client, schema: string) => Promise<void>): Promise<void> {
  const schema = freshSchema("tr");
  const client = createClient({
    databaseUrl: DATABASE_URL,
    schema,
    maxConnections: 4,
    heartbeatInterval: 200,
  });
  try {
    await client.migrate({ engine: "canonical" });
    await fn(client, schema);
  } finally {
    await client.close();
    await dropSchema(schema);
  }
}

/**
 * Keeps a stand-in runtime row live for the whole test: nothing heartbeats it, and a test client's live
 * window (3 heartbeat intervals of 200 ms) is shorter than a storage step can take on a loaded machine.
 */
export async function keepLive(client: Client, id: string): Promise<void> {
  await client.sql.unsafe(
    `update "${client.schema}".runtimes set heartbeat_at = now() + interval '1 hour' where id = $1`,
    [id],
  );
}

/** A live runtime (kept live, see `keepLive`) that runs both engines, as the storage transition asks for. */
export async function liveRuntimeBoth(client: Client, id: string): Promise<void> {
  await client.engine.upsertRuntime({
    id,
    hostname: "h",
    pid: 1,
    queues: [],
    engines: ["canonical", "queue_storage"],
    ready: true,
    leader: false,
    health: {},
  });
  await keepLive(client, id);
}

/** Drops a schema with everything in it, and its queue-storage schema. */
export async function dropSchema(schema: string): Promise<void> {
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {}, prepare: !POOLED });
  try {
    await sql.unsafe(
      `drop schema if exists "${schema}_qs" cascade; drop schema if exists "${schema}" cascade`,
    );
  } finally {
    await sql.end();
  }
}

/** The shortest timeout `waitFor` takes (ms). */
export const WAIT_FLOOR_MS = 60_000;

/** Polls `fn` until it returns a truthy value or the timeout passes. */
export async function waitFor<T>(
  fn: () => Promise<T> | T,
  timeoutMs = 10_000,
  what = "condition",
): Promise<T> {
  // The timeout only decides how long a failing wait goes on, never whether a passing one passes: at least
  // WAIT_FLOOR_MS, so that a slow or loaded machine (a 1 ms sleep taking 5-30 ms) fails no test by time alone.
  timeoutMs = Math.max(timeoutMs, WAIT_FLOOR_MS);
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Makes a scheduled or retryable job due now (whatever the engine), so the next promotion moves it. */
export async function makeDue(client: Client, id: number): Promise<void> {
  const table = TEST_ENGINE === "canonical" ? `"${client.schema}".jobs` : `"${client.schema}_qs".deferred`;
  const key = TEST_ENGINE === "canonical" ? "id" : "job_id";
  await client.sql.unsafe(`update ${table} set run_at = now() where ${key} = ${id}`);
}

/** Grants a role what a worker needs on a test schema (and its queue-storage schema). */
export async function grantWorkerRole(client: Client, role: string): Promise<void> {
  for (const s of [client.schema, `${client.schema}_qs`]) {
    await client.sql.unsafe(`grant usage on schema "${s}" to ${role}`);
    await client.sql.unsafe(`grant all on all tables in schema "${s}" to ${role}`);
    await client.sql.unsafe(`grant all on all sequences in schema "${s}" to ${role}`);
    await client.sql.unsafe(`grant execute on all functions in schema "${s}" to ${role}`);
  }
}

/** Every job the schema holds, on both engines (queue storage's jobs view counts each job once). */
export async function countJobs(client: Client, where = "true"): Promise<number> {
  const [r] = await client.sql.unsafe(
    `select (select count(*) from "${client.schema}".jobs where ${where})
          + (select count(*) from "${client.schema}_qs".jobs where ${where}) as n`,
  );
  return Number(r.n);
}

/** Every job of the schema (both engines) with its state and result, by id. */
export async function jobRows(client: Client): Promise<{ id: number; state: string; result: unknown }[]> {
  const rows = await client.sql.unsafe(
    `select id, state::text as state, result from "${client.schema}".jobs
     union all select id, state::text, result from "${client.schema}_qs".jobs order by id`,
  );
  return rows.map((r) => ({ id: Number(r.id), state: r.state, result: r.result }));
}

/** Sets a running attempt's hard deadline to `expr` (SQL, e.g. `now() - interval '1 second'`). */
export async function setDeadline(client: Client, id: number, expr: string): Promise<void> {
  await client.sql.unsafe(
    TEST_ENGINE === "canonical"
      ? `update "${client.schema}".jobs set deadline_at = ${expr} where id = ${id}`
      // The claim keeps its jobs' policies: the job's kind gets the timeout that puts its deadline there.
      : `update "${client.schema}_qs".claims c
            set deadline_at = least(c.deadline_at, ${expr}),
                policies = jsonb_set(coalesce(c.policies, '{}'), array[j.kind],
                  coalesce(c.policies -> j.kind, '{}') || jsonb_build_object('timeout_ms',
                    (extract(epoch from (${expr}) - c.at) * 1000)::bigint - c.ttl_ms))
           from "${client.schema}_qs".claimed_jobs j
          where j.job_id = ${id} and j.claim_id = c.claim_id and j.slot = c.slot and j.queue = c.queue
            and j.priority = c.priority and j.shard = c.shard`,
  );
}

/** A runtime that heartbeats now (its attempts are not stale). */
export async function liveRuntime(client: Client, id: string): Promise<void> {
  await client.engine.upsertRuntime({
    id,
    hostname: "test",
    pid: 1,
    queues: [],
    ready: true,
    leader: false,
    health: {},
  });
}

/**
 * Makes a runtime look dead: its row and its claims (queue storage rescues by runtime, and leaves a batch
 * claimed within rescueAfter alone) and its attempts' heartbeats (canonical rescues by attempt) are 10
 * minutes old.
 */
export async function staleRuntime(client: Client, id: string): Promise<void> {
  await liveRuntime(client, id);
  // Its claims age first: a leader's sweep that saw the runtime stale while a claim of its was still recent
  // would leave it alone (a claim is a sign of life) and mark the runtime swept, and later sweeps look only
  // at claims made after that sweep, which a claim aged afterwards never is.
  await ageClaims(client, id);
  await client.sql.unsafe(
    `update "${client.schema}".runtimes set heartbeat_at = now() - interval '10 minutes', swept_at = null
      where id = $1`,
    [id],
  );
  await client.sql.unsafe(
    `update "${client.schema}".jobs set heartbeat_at = now() - interval '10 minutes'
      where attempted_by = $1 and state = 'running'`,
    [id],
  );
}

/**
 * Makes a worker's queue-storage claims 10 minutes old: the leader's rescue leaves a batch claimed within
 * rescueAfter alone (a claim is a sign of life), whatever the runtime's heartbeat says.
 */
export async function ageClaims(client: Client, worker: string): Promise<void> {
  await client.sql.unsafe(
    `update "${client.schema}_qs".claims set at = at - interval '10 minutes' where worker = $1`,
    [worker],
  ).catch((e) => {
    if ((e as { code?: string }).code !== "42P01") throw e; // a schema without queue storage
  });
}

/**
 * A test of one engine's internals (plans, scans, its own tables): it runs only in the suite's pass for
 * that engine (SVC_TEST_ENGINE), and is listed as ignored in the other.
 */
export function engineTest(
  engine: "canonical" | "queue_storage",
  name: string,
  fn: () => Promise<void>,
): void {
  Deno.test({ name: `[${engine}] ${name}`, ignore: TEST_ENGINE !== engine, fn });
}

/** A SQL relation with every job of a test schema, on both engines (canonical's columns). */
export function allJobsSql(schema: string): string {
  return `(select * from "${schema}".jobs union all select * from "${schema}_qs".jobs)`;
}

/** Moves the due time of a queue's available jobs back by `interval` (SQL interval text), on either engine. */
export async function backdateAvailable(client: Client, queue: string, interval: string): Promise<void> {
  await client.sql.unsafe(
    TEST_ENGINE === "canonical"
      ? `update "${client.schema}".jobs set run_at = run_at - $2::interval where queue = $1 and state = 'available'`
      : `update "${client.schema}_qs".ready set run_at = run_at - $2::interval where queue = $1`,
    [queue, interval],
  );
}

/** The transition state a fresh test schema starts in. */
export const TEST_TRANSITION: string = TEST_ENGINE === "canonical" ? "canonical" : "active";

/**
 * `svc dev` as a library call: the database (the given PostgreSQL, or a PostgreSQL server of its own
 * started from the npm package's binaries, with its data in `dataDir`), migrations, the admin UI +
 * REST API + callback receiver of `svc serve`, a worker with the example handlers and an HTTP worker
 * pointed at the built-in function endpoint, one cron schedule, and a trickle of example jobs. `stop`
 * undoes all of it in order, the embedded server last.
 */
import { type Client, createClient } from "../client/client.ts";
import { connectWithin, poolTarget } from "../db/connection.ts";
import { createAdminServer } from "../http/server.ts";
import { type HttpServer, serveHttp } from "../platform/platform.ts";
import type { Logger } from "../types.ts";
import { createWorker } from "../worker/worker.ts";
import { ValidationError } from "../errors.ts";
import { startEmbeddedPostgres } from "./embedded_postgres.ts";
import {
  DEV_CRON,
  DEV_KINDS,
  DEV_QUEUE,
  exampleBatch,
  exampleFunction,
  exampleHandlers,
} from "./examples.ts";

/** Options of {@link startDev}. */
export interface DevOptions {
  /** PostgreSQL to use; without one, an embedded server with its data in `dataDir`. */
  databaseUrl?: string;
  schema?: string;
  /** Folder of the embedded server: data, binaries, log (default `.svc-data`). */
  dataDir?: string;
  /** Delete the embedded server's data first. */
  fresh?: boolean;
  /** Port of the embedded server on 127.0.0.1 (default: the last run's when free, else a free one). */
  pgPort?: number;
  /** Address of the UI and API (default 127.0.0.1:3000; port 0 picks a free one). */
  host?: string;
  port?: number;
  /** A batch of example jobs every this many ms (default 5000; 0: only the first batch). */
  everyMs?: number;
  /** Where the progress lines go (default console). */
  log?: (line: string) => void;
  /** Deadline of the first connection to `databaseUrl`, in ms (default 5 000). */
  connectTimeout?: number;
}

/** A running `svc dev`. */
export interface Dev {
  /** The UI address, e.g. `http://127.0.0.1:3000/`. */
  url: string;
  /** `embedded` (a server of its own in `dataDir`) or `postgres` (the given URL). */
  database: "embedded" | "postgres";
  /** The database URL other processes can use (the embedded server's, or the given one). */
  databaseUrl: string;
  /** Embedded: whether `dataDir` already held a database from an earlier run. */
  existed: boolean;
  client: Client;
  stop(): Promise<void>;
}

/** Starts everything; throws (after undoing what started) when something cannot start. */
export async function startDev(o: DevOptions = {}): Promise<Dev> {
  const log = o.log ?? ((line: string) => console.log(line));
  const undo: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const u of undo.splice(0).reverse()) {
      await u().catch((e) => log(`svc dev: while stopping: ${e.message}`));
    }
  };
  try {
    // The port first, so that a port in use fails at once; requests wait for the rest.
    let server: HttpServer;
    const host = o.host ?? "127.0.0.1";
    let handler = (_: Request): Promise<Response> =>
      Promise.resolve(
        new Response("svc dev is starting\n", { status: 503, headers: { "retry-after": "1" } }),
      );
    try {
      server = await serveHttp({ hostname: host, port: o.port ?? 3000 }, (req) => handler(req));
    } catch (e) {
      throw new ValidationError(
        `cannot listen on ${host}:${o.port ?? 3000} (${(e as Error).message}); choose another --port`,
      );
    }
    undo.push(() => server.close());
    const base = `http://${host.includes(":") ? `[${host}]` : host}:${server.addr.port}`;

    let databaseUrl = o.databaseUrl;
    let existed = false;
    if (!databaseUrl) {
      const dir = o.dataDir ?? ".svc-data";
      const pg = await startEmbeddedPostgres({
        root: dir,
        fresh: o.fresh,
        port: o.pgPort,
        log: (line) => log(`svc dev: ${line}`),
      });
      undo.unshift(() => pg.stop()); // undone last, after everything that uses it
      databaseUrl = pg.url;
      existed = pg.existed;
      log(
        `svc dev: data in ${dir}/pg (${existed ? "from the earlier runs" : "new"}; kept across runs, ` +
          "--fresh starts over); the embedded PostgreSQL is for trying svc and local development, not production",
      );
    }
    const client = createClient({ databaseUrl, schema: o.schema, maxConnections: 5 });
    undo.push(() => client.close());
    if (o.databaseUrl) {
      // The user's database: an address that answers but is not PostgreSQL must not hang svc dev.
      await connectWithin(client.db.query("select 1"), {
        timeoutMs: o.connectTimeout ?? 5_000,
        target: poolTarget(client.sql),
        fix:
          "--database-url / DATABASE_URL and that PostgreSQL is running there (or raise --connect-timeout)",
        end: () => client.sql.end({ timeout: 0 }),
      });
    }
    const m = await client.migrate();
    if (m.applied.length) log(`svc dev: schema ${client.schema} migrated to version ${m.to}`);

    const secret = crypto.getRandomValues(new Uint8Array(32));
    handler = createAdminServer(client, {
      callbackAuth: { kind: "signed", secret },
      defaultQueue: DEV_QUEUE, // the UI's enqueue form: the queue the dev worker serves
      logger: { info: () => {}, error: (line: string) => log(line) },
    }).fetch;
    const fn = exampleFunction(log);
    const fnServer = await serveHttp({ hostname: "127.0.0.1", port: 0 }, fn.fetch);
    undo.push(() => fnServer.close());
    undo.push(() => fn.close());

    const worker = createWorker({
      client,
      schema: client.schema,
      queues: { [DEV_QUEUE]: { maxWorkers: 5 } },
      handlers: exampleHandlers(),
      httpWorkers: {
        [DEV_KINDS.httpCallback]: {
          url: `http://127.0.0.1:${fnServer.addr.port}/`,
          mode: "async",
          callbackBaseUrl: base,
          callbackTimeout: 60_000,
          hmacSecret: secret,
        },
      },
      cron: DEV_CRON,
      maintenanceInterval: 500,
      leaderElectionInterval: 2_000,
      logger: devLogger(log),
      on: {
        completed: (j) => log(`svc dev: job ${j.id} ${j.kind} completed: ${JSON.stringify(j.result)}`),
        retried: (j, e) => log(`svc dev: job ${j.id} ${j.kind} will retry: ${(e as Error).message}`),
        failed: (j, e) => log(`svc dev: job ${j.id} ${j.kind} failed: ${(e as Error).message}`),
      },
    });
    await worker.start();
    undo.push(() => worker.shutdown(5_000));

    const trickle = startTrickle(client, o.everyMs ?? 5_000, log);
    undo.push(trickle);

    return {
      url: `${base}/`,
      database: o.databaseUrl ? "postgres" : "embedded",
      databaseUrl,
      existed,
      client,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Enqueues a batch now and then one every `everyMs`; returns the stop function. */
function startTrickle(client: Client, everyMs: number, log: (line: string) => void): () => Promise<void> {
  let stopped = false;
  let wake = () => {};
  const loop = (async () => {
    for (let n = 0; !stopped; n++) {
      try {
        const jobs = await client.enqueueMany(exampleBatch(n));
        log(`svc dev: enqueued jobs ${jobs.map((j) => `${j.id} ${j.kind}`).join(", ")}`);
      } catch (e) {
        log(`svc dev: could not enqueue the example jobs: ${(e as Error).message}`);
      }
      if (everyMs <= 0) return;
      await new Promise<void>((r) => {
        const t = setTimeout(r, everyMs);
        wake = () => {
          clearTimeout(t);
          r();
        };
      });
    }
  })();
  return async () => {
    stopped = true;
    wake();
    await loop;
  };
}

/** The worker's lines on the same output, without debug. */
function devLogger(log: (line: string) => void): Logger {
  const line = (...a: unknown[]) => log(a.map(String).join(" "));
  return { debug: () => {}, info: line, warn: line, error: line };
}

/**
 * Timings of the admin UI's queries with 1,000,000 jobs (not run in CI: it takes a minute or two).
 *
 *   deno run -A bench/dashboard_queries.ts [--jobs 1000000] [--runs 7] [--keep]
 *
 * Creates its own database (`svc_bench_dashboard` on the server of DATABASE_URL, default the local
 * one), generates the jobs with one `INSERT ... SELECT generate_series` (10 queues, 20 kinds, every
 * state; terminal jobs finalized over the last 24 hours,
 * the retention of completed jobs), vacuums and analyzes, then times each
 * route the UI calls through `svc serve`'s router in-process (SQL + JSON, no network). Prints a
 * Markdown table: median and slowest of `--runs` runs after one warm-up. Drops the database unless
 * `--keep`.
 */
import postgres from "postgres";
import { createClient } from "../src/client/client.ts";
import { createAdminServer } from "../src/http/server.ts";

const argv = Deno.args;
const opt = (name: string, fallback: string) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] ? argv[i + 1] : fallback;
};
const JOBS = Number(opt("--jobs", "1000000"));
const RUNS = Number(opt("--runs", "7"));
const KEEP = argv.includes("--keep");
const SERVER_URL = Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres";
const DB = "svc_bench_dashboard";
const url = new URL(SERVER_URL);
url.pathname = `/${DB}`;
const BENCH_URL = url.toString();

const admin = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
await admin.unsafe(`drop database if exists ${DB}`);
await admin.unsafe(`create database ${DB}`);

const client = createClient({ databaseUrl: BENCH_URL, maxConnections: 4 });
try {
  await client.migrate();
  const q = client.names.q;
  const t0 = performance.now();
  // States: 60 % completed, 10 % failed, 5 % cancelled, 15 % available, 4 % scheduled, 3 % retryable,
  // 2 % running, 1 % waiting_external.
  await client.sql.unsafe(`
    insert into ${q}.jobs (kind, queue, args, state, priority, attempt, max_attempts, run_at, created_at,
                           attempted_at, finalized_at, errors, tags)
    select 'kind_' || (g % 20),
           'queue_' || (g % 10),
           jsonb_build_object('user_id', g, 'email', 'user' || g || '@example.com', 'note', md5(g::text)),
           s.state::${q}.job_state,
           1 + g % 4,
           case when s.state in ('available', 'scheduled') then 0 else 1 end,
           25,
           case when s.state = 'scheduled' then now() + interval '1 hour' else now() - interval '3 hours' end,
           now() - interval '3 hours' + (g::float8 / ${JOBS}) * interval '3 hours',
           case when s.state in ('available', 'scheduled') then null else now() - interval '2 hours' end,
           case when s.state in ('completed', 'failed', 'cancelled')
                then now() - (random() * interval '24 hours') end,
           case when s.state in ('failed', 'retryable')
                then jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), 'error', 'boom')) else '[]' end,
           case when g % 100 = 0 then array['vip'] else '{}' end
      from generate_series(1, ${JOBS}) g,
           lateral (select case
             when g % 100 < 60 then 'completed' when g % 100 < 70 then 'failed' when g % 100 < 75 then 'cancelled'
             when g % 100 < 90 then 'available' when g % 100 < 94 then 'scheduled' when g % 100 < 97 then 'retryable'
             when g % 100 < 99 then 'running' else 'waiting_external' end as state) s`);
  await client.sql.unsafe(`vacuum analyze ${q}.jobs`);
  const loadSeconds = ((performance.now() - t0) / 1000).toFixed(1);

  const app = createAdminServer(client, {
    callbackAuth: { kind: "unsigned" },
    logger: { info: () => {}, error: (l: string) => console.error(l) },
  });
  const get = async (path: string) => {
    const res = await app.fetch(new Request(`http://bench${path}`));
    const body = await res.json();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    return body;
  };
  const first = await get("/api/jobs?limit=50");
  const [someId] = first.jobs.map((j: { id: number }) => j.id);
  const paths = [
    "/api/stats",
    "/api/queues",
    "/api/kinds",
    "/api/jobs?limit=50",
    `/api/jobs?limit=50&cursor=${encodeURIComponent(first.next_cursor)}`,
    "/api/jobs?state=failed&limit=50",
    "/api/jobs?state=waiting_external&limit=50",
    "/api/jobs?kind=kind_7&limit=50",
    "/api/jobs?queue=queue_3&limit=50",
    "/api/jobs?tag=vip&limit=50",
    "/api/jobs?q=user4242%40&limit=50",
    `/api/jobs/${someId}`,
    "/api/runtimes",
    "/api/cron",
    "/api/storage",
    "/api/capabilities",
  ];
  const rows: string[] = [];
  for (const p of paths) {
    await get(p);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const s = performance.now();
      await get(p);
      times.push(performance.now() - s);
    }
    times.sort((a, b) => a - b);
    rows.push(
      `| \`GET ${p.replace(/cursor=[^&]+/, "cursor=…")}\` | ${
        times[Math.floor(times.length / 2)].toFixed(1)
      } | ${times.at(-1)!.toFixed(1)} |`,
    );
  }
  const [{ version }] = await client.sql.unsafe("select current_setting('server_version') as version");
  console.log(`# Dashboard queries with ${JOBS.toLocaleString("en-US")} jobs\n`);
  console.log(
    `PostgreSQL ${version}; jobs generated in ${loadSeconds} s (vacuum analyze included); ` +
      `${RUNS} runs per route after one warm-up; in-process router (SQL + JSON, no network).\n`,
  );
  console.log("| route | median ms | slowest ms |\n|---|---:|---:|");
  for (const r of rows) console.log(r);
} finally {
  await client.close();
  if (!KEEP) await admin.unsafe(`drop database if exists ${DB}`);
  await admin.end();
}

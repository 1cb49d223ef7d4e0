/**
 * Probe: tuple writes per completed job (inserts + updates + deletes over every table of the database,
 * catalogs and TOAST included, from pg_stat_all_tables), from enqueue through claim, completion and the
 * leader's maintenance, for a drain of N jobs by one worker (args: N [prefetch] [engine]; defaults 20000,
 * 0, queue_storage). Runs on a throw-away database of its own; prints the writes per job and per table.
 */
import { createClient, createWorker } from "../../mod.ts";
import postgres from "postgres";

const N = Number(Deno.args[0] ?? 20_000);
const PREFETCH = Number(Deno.args[1] ?? 0);
const ENGINE = (Deno.args[2] ?? "queue_storage") as "queue_storage" | "canonical";
const base = Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres";
const db = `svc_tw_${Date.now() % 1_000_000}`;
const admin = postgres(base, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${db}`);
const url = base.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);
const sql = postgres(url, { max: 1, onnotice: () => {} });

/** Writes per table so far (the statistics collector's view, flushed first). */
async function writes(): Promise<Map<string, number>> {
  await sql.unsafe(`select pg_stat_force_next_flush()`).catch(() => {});
  await new Promise((r) => setTimeout(r, 600));
  const rows = await sql.unsafe(
    `select schemaname || '.' || relname as t, n_tup_ins + n_tup_upd + n_tup_del as w from pg_stat_all_tables`,
  );
  return new Map(rows.map((r) => [r.t as string, Number(r.w)]));
}

try {
  const client = createClient({ databaseUrl: url, maxConnections: 4 });
  await client.migrate({ engine: ENGINE });
  // A warm-up set outside the measured window (catalog writes of a first run, partitions, runtimes row).
  await client.enqueueMany(Array.from({ length: 100 }, () => ({ kind: "noop" })));
  const warm = createWorker({
    client,
    handlers: { noop: () => null },
    queues: { default: { maxWorkers: 10 } },
  });
  await warm.start();
  while ((await client.listJobs({ state: "available", limit: 1 })).jobs.length) {
    await new Promise((r) => setTimeout(r, 100));
  }
  await warm.shutdown(5_000);
  const before = await writes();
  const t0 = performance.now();
  for (let i = 0; i < N; i += 1000) {
    await client.enqueueMany(Array.from({ length: Math.min(1000, N - i) }, () => ({ kind: "noop" })));
  }
  let done = 0;
  const worker = createWorker({
    client,
    handlers: { noop: () => null },
    queues: { default: { maxWorkers: 10, prefetch: PREFETCH } },
    on: { completed: () => void done++ },
  });
  await worker.start();
  while (done < N) await new Promise((r) => setTimeout(r, 50));
  const ms = performance.now() - t0;
  await worker.shutdown(5_000);
  const after = await writes();
  const per = [...after].map(([t, w]) => [t, w - (before.get(t) ?? 0)] as const).filter(([, d]) => d > 0)
    .sort((a, b) => b[1] - a[1]);
  const total = per.reduce((s, [, d]) => s + d, 0);
  console.log(
    `${ENGINE}, prefetch ${PREFETCH}: ${N} jobs in ${(ms / 1000).toFixed(1)} s (${
      Math.round(N / (ms / 1000))
    } jobs/s incl. enqueue); tuple writes per job ${(total / N).toFixed(3)}`,
  );
  for (const [t, d] of per.slice(0, 12)) console.log(`  ${t.padEnd(40)} ${(d / N).toFixed(3)}`);
  await client.close();
} finally {
  await sql.end();
  await admin.unsafe(`drop database if exists ${db} with (force)`);
  await admin.end();
}

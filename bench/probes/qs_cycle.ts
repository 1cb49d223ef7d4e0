/**
 * Probe: queue storage's claim and completion, one after another on one connection, as the worker calls them
 * (args: L K [SLOTS] [SHARDS] [LIVE]): K cycles of `claim(L)` then `complete_many` of those L jobs (env JSON=1:
 * `complete`, the JSON form; FLUSH=n: n at a time, the completion figure then covers every part), with
 * `synchronous_commit` off so that the WAL flush is not in the figures. Prints, per call, the wall time and
 * the backend's CPU time (from /proc: the server must run on this machine), and the relation locks one claim
 * and one completion take. LIVE (default 1) is the number of ring slots that hold ready rows when the cycles
 * start: completed jobs stay in the ring for the retention, so in a steady state every slot is live.
 */
import { createClient } from "../../mod.ts";
import postgres from "postgres";

const L = Number(Deno.args[0] ?? 10), K = Number(Deno.args[1] ?? 1000);
const SLOTS = Number(Deno.args[2] ?? 8), SHARDS = Number(Deno.args[3] ?? 4), LIVE = Number(Deno.args[4] ?? 1);
const db = "bench_probe_qs_cycle";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe(`drop database if exists ${db}`);
await admin.unsafe(`create database ${db}`);
const url = `postgres://postgres@127.0.0.1:5432/${db}`;
const client = createClient({ databaseUrl: url });
await client.migrate({ qsSlots: SLOTS, qsShards: SHARDS });
await client.close();
const sql = postgres(url, { max: 1, onnotice: () => {} });
const policies = JSON.stringify({ noop: { max_attempts: 25, timeout_ms: 60_000 } });
const claim = (n: number) =>
  sql.unsafe(
    `select * from svc_qs.claim_next($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, $8::text::bigint[])`,
    [
      "default",
      n,
      n,
      "probe",
      policies,
      "{}",
      0,
      "{}",
    ],
    { prepare: true },
  );
/** `complete_many`, the worker's call: the same completions as array literals. */
const completeMany = (rows: postgres.Row[]) =>
  sql.unsafe(
    `select svc_qs.complete_many($1::text::bigint[], $2::text::integer[], $3::text::smallint[],
       $4::text::bigint[], $5::text::bigint[], $6::text::jsonb[], $7::text::text[], true) as id`,
    [
      `{${rows.map((r) => r.job_id).join(",")}}`,
      `{${rows.map((r) => r.lease).join(",")}}`,
      `{${rows.map((r) => r.slot).join(",")}}`,
      `{${rows.map((r) => r.claim_id).join(",")}}`,
      `{${rows.map(() => Date.now()).join(",")}}`,
      `{${rows.map(() => "NULL").join(",")}}`,
      `{${rows.map(() => "NULL").join(",")}}`,
    ],
    { prepare: true },
  );
/** `complete`, the JSON form (env JSON=1; callers in a transaction of their own used it before). */
const complete = (rows: postgres.Row[]) => Deno.env.get("JSON") ? completeJson(rows) : completeMany(rows);
const completeJson = (rows: postgres.Row[]) =>
  sql.unsafe(`select svc_qs.complete($1::text::jsonb, true) as id`, [
    JSON.stringify(rows.map((r) => ({
      id: Number(r.job_id),
      lease: r.lease,
      slot: r.slot,
      claim: Number(r.claim_id),
      started_at: new Date().toISOString(),
      result: null,
    }))),
  ], { prepare: true });
const enqueue = async (n: number) => {
  for (let i = 0; i < n; i += 1000) {
    const jobs = Array.from({ length: Math.min(1000, n - i) }, () => ({
      kind: "noop",
      queue: "default",
      args: {},
      priority: 2,
      max_attempts: 25,
      tags: [],
      metadata: {},
    }));
    await sql.unsafe(`select count(*) from svc.enqueue_batch($1::text::json)`, [JSON.stringify(jobs)]);
  }
};
// Live slots: a few jobs in each earlier slot, claimed and completed, then a rotation to the next one.
for (let s = 1; s < Math.min(LIVE, SLOTS - 1); s++) {
  await enqueue(L);
  await complete(await claim(L));
  await sql.unsafe(`insert into svc_qs.ring_rotations (generation, slot) values ($1, $2)`, [s, s]);
}
await enqueue(L * (K + 2));
await sql.unsafe(`set synchronous_commit = off`);
const [{ pid }] = await sql.unsafe(`select pg_backend_pid() as pid`);
/** The backend's user + system CPU time in ms (clock ticks of 10 ms). */
const cpu = () => {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
/** Relation locks held by this session inside a transaction that ran `fn`. */
const locks = async (fn: () => Promise<unknown>) => {
  await sql.unsafe("begin");
  await fn();
  const [r] = await sql.unsafe(`select count(*)::int as n from pg_locks where pid = pg_backend_pid()
                                  and locktype = 'relation'`);
  await sql.unsafe("commit");
  return r.n - 1; // pg_locks itself
};
// Warm: plans cached (the functions run generic plans), then count the locks of one cycle.
await complete(await claim(L));
let claimed: postgres.Row[] = [];
const claimLocks = await locks(async () => claimed = await claim(L));
const completeLocks = await locks(() => complete(claimed));
let wc = 0, wk = 0, cc = 0, ck = 0;
for (let k = 0; k < K; k++) {
  let c = cpu(), w = performance.now();
  const rows = await claim(L);
  wc += performance.now() - w;
  cc += cpu() - c;
  if (rows.length !== L) throw new Error(`claimed ${rows.length} of ${L}`);
  c = cpu(), w = performance.now();
  // env FLUSH=n: the claim's jobs completed n at a time (a worker with prefetch flushes a claim in parts).
  const flush = Number(Deno.env.get("FLUSH") ?? L);
  for (let i = 0; i < rows.length; i += flush) await complete(rows.slice(i, i + flush));
  wk += performance.now() - w;
  ck += cpu() - c;
}
const f = (x: number) => (x / K).toFixed(3);
const perJob = ((cc + ck) / K / L * 1000).toFixed(0);
console.log(`L=${L} slots=${SLOTS} shards=${SHARDS} live=${LIVE} (per call):`);
console.log(`  claim ${f(wc)} ms wall, ${f(cc)} ms backend CPU, ${claimLocks} relation locks`);
console.log(`  complete ${f(wk)} ms wall, ${f(ck)} ms backend CPU, ${completeLocks} relation locks`);
console.log(`  backend CPU per job ${perJob} µs`);
await sql.end();
await admin.unsafe(`drop database ${db}`);
await admin.end();

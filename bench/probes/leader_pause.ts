/**
 * Probe: how long promotion pauses while the leader is stopped (SIGSTOP), with the default leaderTtl
 * (15 s) and leaderElectionInterval (10 s). Two worker processes (tests/fixtures/worker_process.ts) on a
 * fresh schema of the local server; a scheduled job falls due every 250 ms; the leader is stopped 8 s in and
 * stays stopped. Prints when the term moved and the longest wait of a due job for its first attempt by the
 * live worker (promotion paused meanwhile). Args: [engine] (canonical | queue_storage).
 */
import { createClient } from "../../mod.ts";
import { spawnWorker } from "../../tests/helpers/process.ts";
import { dropSchema, freshSchema } from "../../tests/helpers/db.ts";

const engine = (Deno.args[0] ?? "canonical") as "canonical" | "queue_storage";
const schema = freshSchema("pause");
const client = createClient({ databaseUrl: "postgres://postgres@127.0.0.1:5432/postgres", schema });
await client.migrate({ engine });
await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
const env = { ELECTION_MS: "10000", LEADER_TTL_MS: "15000", RESCUE_MS: "90000" };
const procs = [spawnWorker(schema, env), spawnWorker(schema, env)];
const ids = (await Promise.all(procs.map((p) => p.waitLine(/^started /, 60_000)))).map((l) => l.slice(8));
const holder = async () =>
  (await client.sql.unsafe(`select holder from "${schema}".leadership`))[0]?.holder as string | null;
while (!(await holder())) await new Promise((r) => setTimeout(r, 100));
const t0 = Date.now();
const jobs = [];
for (let i = 0; i < 240; i++) {
  jobs.push(await client.enqueue("effect", { i }, { runAt: new Date(t0 + 2_000 + i * 250) }));
}
await new Promise((r) => setTimeout(r, Math.max(0, t0 + 8_000 - Date.now())));
const leader = await holder();
const li = ids.indexOf(leader!);
procs[li].child.kill("SIGSTOP");
const stoppedAt = Date.now();
let movedAt = 0;
while (Date.now() - stoppedAt < 50_000) {
  const h = await holder();
  if (!movedAt && h && h !== leader) movedAt = Date.now();
  await new Promise((r) => setTimeout(r, 100));
}
const rows = await client.sql.unsafe(
  `select extract(epoch from max(attempted_at - run_at))::float8 as lag from (
     select attempted_at, run_at, attempted_by from "${schema}".jobs
     union all select attempted_at, run_at, attempted_by from "${schema}_qs".jobs) j
    where attempted_by = $1`,
  [ids[1 - li]],
);
console.log(
  `${engine}: leader stopped; term moved after ${((movedAt - stoppedAt) / 1000).toFixed(1)} s; ` +
    `longest wait of a due job for the live worker: ${Number(rows[0].lag).toFixed(1)} s`,
);
procs[li].child.kill("SIGCONT");
await Promise.all(procs.map((p) => p.kill("SIGKILL").catch(() => {})));
await client.close();
await dropSchema(schema);
Deno.exit(0);

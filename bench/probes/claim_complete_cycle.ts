/** Probe: claim L jobs and complete them, K times one after another, with the engine's SQL on one connection (args: L K [del]; env V = SQL run first, e.g. to drop an index; TAG = a label); prints jobs/s and the mean time of each statement. */
import { createClient } from "../../mod.ts";
import postgres from "postgres";
const L = Number(Deno.args[0] ?? 10), K = Number(Deno.args[1] ?? 1000), DEL = Deno.args[2] === "del";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists cyc");
await admin.unsafe("create database cyc");
const url = "postgres://postgres@127.0.0.1:5432/cyc";
const client = createClient({ databaseUrl: url });
await client.migrate();
for (let i = 0; i < L * K; i += 1000) {
  await client.enqueueMany(Array.from({ length: 1000 }, () => ({ kind: "noop" })));
}
await client.close();
const sql = postgres(url, { max: 2, onnotice: () => {} });
if (Deno.env.get("V")) await sql.unsafe(Deno.env.get("V")!);
const claim = Deno.env.get("CLAIM") ?? `with next as (
  select id from svc.jobs where state = 'available' and queue = $1
    and not exists (select 1 from svc.queues q where q.name = $1 and q.paused)
  order by priority, run_at, id limit $2 for update skip locked)
update svc.jobs j set state = 'running', attempt = j.attempt + 1, lease = j.lease + 1, attempted_at = now(),
  heartbeat_at = now(), attempted_by = $3,
  deadline_at = now() + (($4::text::jsonb ->> j.kind)::bigint * interval '1 millisecond')
from next where j.id = next.id returning j.*`;
const input = `json_to_recordset($1::text::json) as u(id bigint, lease integer, result json)`;
const complete = DEL
  ? `delete from svc.jobs j using ${input} where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`
  : `update svc.jobs j set state = 'completed', result = u.result::jsonb, finalized_at = now(), heartbeat_at = null, deadline_at = null
     from ${input} where j.id = u.id and j.lease = u.lease and j.state = 'running' returning j.id`;
let tc = 0, tx = 0;
const t0 = performance.now();
for (let k = 0; k < K; k++) {
  const a = performance.now();
  const rows = await sql.unsafe(claim, ["default", L, "rt", JSON.stringify({ noop: 60000 })], {
    prepare: true,
  });
  const b = performance.now();
  const done = await sql.unsafe(complete, [
    JSON.stringify(rows.map((r) => ({ id: r.id, lease: r.lease, result: null }))),
  ], { prepare: true });
  tc += b - a;
  tx += performance.now() - b;
  if (done.length !== rows.length || rows.length !== L) {
    throw new Error("short " + rows.length + " " + done.length);
  }
}
const t = performance.now() - t0;
console.log(
  `L=${L} ${DEL ? "del" : "upd"} ${Deno.env.get("TAG") ?? ""}: ${
    (L * K / (t / 1000)).toFixed(0)
  } jobs/s sequential; claim ${(tc / K).toFixed(3)} ms, complete ${(tx / K).toFixed(3)} ms per cycle`,
);
await sql.end();
await admin.unsafe("drop database cyc");
await admin.end();

/** Probe: pickup latency split into its parts (200 jobs 20 ms apart): when the enqueue call returns, when a second listener gets the NOTIFY, when the handler starts (p50, p95, p99, max of each, and the parts of the five slowest pickups). */
import { createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_pick");
await admin.unsafe("create database bench_probe_pick");
const url = "postgres://postgres@127.0.0.1:5432/bench_probe_pick";
const client = createClient({ databaseUrl: url, maxConnections: 10 });
await client.migrate();
const lis = postgres(url, { max: 1 });
let tNotify = 0;
await lis.listen(client.names.jobsChannel, () => {
  tNotify = performance.now();
});
let resolveStart!: (t: number) => void;
const w = createWorker({
  client,
  queues: { default: { maxWorkers: 10 } },
  logger: silentLogger,
  handlers: {
    p: () => {
      resolveStart(performance.now());
    },
  },
});
await w.start();
await new Promise((r) => setTimeout(r, 1000));
const enq: number[] = [], notif: number[] = [], start: number[] = [];
for (let i = 0; i < 200; i++) {
  const started = new Promise<number>((r) => resolveStart = r);
  const t0 = performance.now();
  await client.enqueue("p", {});
  const t1 = performance.now();
  const t3 = await started;
  enq.push(t1 - t0);
  notif.push(tNotify - t0);
  start.push(t3 - t0);
  await new Promise((r) => setTimeout(r, 20));
}
const pct = (a: number[], q: number) =>
  [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * q))];
const line = (name: string, a: number[]) =>
  `${name.padEnd(18)} p50 ${pct(a, 0.5).toFixed(2)}  p95 ${pct(a, 0.95).toFixed(2)}  p99 ${
    pct(a, 0.99).toFixed(2)
  }  max ${pct(a, 1).toFixed(2)}`;
const afterNotify = start.map((s, i) => s - notif[i]);
console.log(line("enqueue resolved", enq));
console.log(line("notification at", notif));
console.log(line("handler start", start));
console.log(line("start - notify", afterNotify));
// The slowest pickups, with their parts: which part makes the tail.
const slow = start.map((_, i) => i).sort((a, b) => start[b] - start[a]).slice(0, 5);
for (const i of slow) {
  console.log(
    `  #${i}: enqueue ${enq[i].toFixed(2)}, notify ${notif[i].toFixed(2)}, start ${start[i].toFixed(2)} ms`,
  );
}
await w.shutdown(1000);
await lis.end();
await client.close();
await admin.unsafe("drop database bench_probe_pick");
await admin.end();

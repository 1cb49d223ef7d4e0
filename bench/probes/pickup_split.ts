/** Probe: pickup latency split into its parts (200 jobs 20 ms apart): when the enqueue call returns, when a second listener gets the NOTIFY, when the handler starts (medians). */
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
const p50 = (a: number[]) => a.sort((x, y) => x - y)[a.length >> 1].toFixed(2);
console.log(
  `p50 ms: enqueue resolved ${p50(enq)}, notification at ${p50(notif)}, handler start ${p50(start)}`,
);
await w.shutdown(1000);
await lis.end();
await client.close();
await admin.unsafe("drop database bench_probe_pick");
await admin.end();

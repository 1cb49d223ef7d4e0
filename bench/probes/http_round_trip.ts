/** Probe: HTTP worker round trip (args: N maxWorkers pool), with the time spent in each engine call. */
import { createCallbackRouter, createClient, createWorker, silentLogger } from "../../mod.ts";
import postgres from "postgres";
const N = Number(Deno.args[0] ?? 2000), C = Number(Deno.args[1] ?? 50), POOL = Number(Deno.args[2] ?? 10);
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists bench_probe_http");
await admin.unsafe("create database bench_probe_http");
const client = createClient({
  databaseUrl: "postgres://postgres@127.0.0.1:5432/bench_probe_http",
  maxConnections: POOL,
});
await client.migrate();
const router = createCallbackRouter(client, { pathPrefix: "/api/callbacks", auth: { kind: "unsigned" } });
const ac = new AbortController();
const receiver = Deno.serve(
  { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
  (r) => router.fetch(r),
);
let done = 0;
let resolve!: () => void;
const all = new Promise<void>((r) => resolve = r);
const stats = { post: 0, cb: 0 };
const fn = Deno.serve({ hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} }, async (req) => {
  const body = await req.json();
  queueMicrotask(async () => {
    const t = performance.now();
    const res = await fetch(body.callback_url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payload: { ok: true } }),
    });
    await res.body?.cancel();
    stats.cb += performance.now() - t;
    if (++done === N) resolve();
  });
  return new Response(null, { status: 202 });
});
await client.enqueueMany(Array.from({ length: N }, () => ({ kind: "h", args: {} })));
const eng = client.engine as any;
const st: Record<string, [number, number]> = {};
for (const m of ["claim", "registerCallback", "park", "resolveCallback"]) {
  const o = eng[m].bind(eng);
  eng[m] = async (...a: any[]) => {
    const t = performance.now();
    try {
      return await o(...a);
    } finally {
      const s = st[m] ??= [0, 0];
      s[0]++;
      s[1] += performance.now() - t;
    }
  };
}
const w = createWorker({
  client,
  queues: { default: { maxWorkers: C } },
  logger: silentLogger,
  httpWorkers: {
    h: {
      url: `http://127.0.0.1:${fn.addr.port}/fn`,
      mode: "async",
      callbackBaseUrl: `http://127.0.0.1:${receiver.addr.port}`,
    },
  },
});
const t0 = performance.now();
await w.start();
await all;
console.log(
  `http ${N} at maxWorkers ${C} pool ${POOL}: ${
    (N / ((performance.now() - t0) / 1000)).toFixed(0)
  } jobs/s; callback ms avg ${(stats.cb / N).toFixed(1)}`,
);
for (const [k, [n, ms]] of Object.entries(st)) console.log(k, n, (ms / n).toFixed(2), "ms avg");
await w.shutdown(1000);
ac.abort();
await client.close();
await admin.unsafe("drop database bench_probe_http");
await admin.end();

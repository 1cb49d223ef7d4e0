/**
 * A rolling upgrade rehearsed with real OS processes: a database of the older line (canonical) with
 * 10,000 jobs queued, producers enqueueing throughout, three worker processes, one of them of the older
 * line (canonical only). The workers are restarted one at a time as new-line workers; then `svc storage
 * prepare`, `enter-mixed-transition` and `finalize --wait`. At the end every job ran to completion exactly
 * once, nothing unfinished is left in canonical, and the state is active.
 */
import assert from "node:assert/strict";
import { createClient } from "../../src/client/client.ts";
import { allJobsSql, DATABASE_URL, dropSchema, engineTest, freshSchema, waitFor } from "../helpers/db.ts";
import { type Proc, spawnWorker } from "../helpers/process.ts";
import { svcIn } from "../helpers/cli.ts";

engineTest(
  "queue_storage",
  "rolling upgrade: canonical with a backlog to queue storage under load, every job once",
  async () => {
    const schema = freshSchema("roll");
    const client = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 4 });
    const procs: Proc[] = [];
    let producing = true;
    const enqueued: number[] = [];
    let producer: Promise<void> = Promise.resolve();
    try {
      await client.migrate({ engine: "canonical" });
      await client.sql.unsafe(`create table "${schema}".effects (job_id bigint not null, pid int not null)`);
      for (let i = 0; i < 10; i++) {
        const jobs = await client.enqueueMany(
          Array.from({ length: 1000 }, (_, j) => ({ kind: "effect", args: { n: i * 1000 + j } })),
        );
        enqueued.push(...jobs.map((j) => j.id));
      }
      const start = (env: Record<string, string> = {}) => {
        const p = spawnWorker(schema, { RESCUE_MS: "60000", MAX_WORKERS: "10", ...env });
        procs.push(p);
        return p;
      };
      // The fleet: one worker of the older line, two of the new.
      const fleet = [start({ ENGINES: "canonical" }), start(), start()];
      await Promise.all(fleet.map((p) => p.waitLine(/^started /)));
      // Producers keep enqueueing through every step.
      producer = (async () => {
        let n = 0;
        // At most 6,000 jobs (a normal machine's whole run is about 15 s of it): a slow machine's longer
        // steps do not pile up more work than its workers drain.
        while (producing && n < 6_000) {
          const jobs = await client.enqueueMany(
            Array.from({ length: 20 }, () => ({ kind: "effect", args: { p: n++ } })),
          );
          enqueued.push(...jobs.map((j) => j.id));
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      const step = async (...args: string[]) => {
        const r = await svcIn(schema, ["storage", ...args]);
        assert.equal(r.code, 0, `${args.join(" ")}: ${r.stdout} ${r.stderr}`);
        return r.stdout;
      };
      assert.match(await step("prepare"), /canonical -> prepared/);
      // Rolling restart: each process stops gracefully and a new-line one takes its place.
      for (let i = 0; i < fleet.length; i++) {
        await fleet[i].kill("SIGTERM");
        const next = start();
        await next.waitLine(/^started /);
        fleet[i] = next;
      }
      assert.match(await step("enter-mixed-transition"), /prepared -> mixed_transition/);
      await new Promise((r) => setTimeout(r, 500));
      assert.match(await step("finalize", "--wait", "--timeout", "120"), /mixed_transition -> active/);
      producing = false;
      await producer;
      await waitFor(
        async () => {
          const [r] = await client.sql.unsafe(
            `select count(*)::int as n from ${allJobsSql(schema)} j where state <> 'completed'`,
          );
          return r.n === 0;
        },
        600_000,
        "every job completed",
      );
      const [e] = await client.sql.unsafe(
        `select count(*)::int as total, count(distinct job_id)::int as jobs from "${schema}".effects`,
      );
      assert.equal(e.jobs, enqueued.length, "every job ran");
      assert.equal(e.total, enqueued.length, "none ran twice");
      const [left] = await client.sql.unsafe(
        `select count(*)::int as n from "${schema}".jobs
        where state in ('scheduled', 'available', 'running', 'waiting_external', 'retryable')`,
      );
      assert.equal(left.n, 0, "no unfinished job in canonical");
      const [qs] = await client.sql.unsafe(`select count(*)::int as n from "${schema}_qs".jobs`);
      assert.ok(qs.n > 0, "new work ran on queue storage");
      assert.equal((await client.storageStatus()).state, "active");
    } finally {
      producing = false;
      await producer.catch(() => {});
      await Promise.all(procs.map((p) => p.kill("SIGTERM")));
      await client.close();
      await dropSchema(schema);
    }
  },
);

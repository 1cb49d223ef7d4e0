/**
 * An attempt whose outcome the worker could not write (its write refused for good, or out of retries)
 * does not stay `running` while its runtime lives: the heartbeat names it (`health.abandoned` of the
 * runtimes row) and the leader's rescue retries it long before `rescueAfter`. The refusal is a trigger
 * of the test's own in the test's schema that raises on this job's outcome write (an error svc does not
 * retry), on the table each engine writes the outcome to.
 */
import assert from "node:assert/strict";
import { TEST_ENGINE, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import type { Client } from "../../src/client/client.ts";

/** Makes every outcome write of job `id` fail; returns the function that lifts it. */
async function refuseOutcomes(client: Client, id: number): Promise<() => Promise<void>> {
  const s = `"${client.schema}"`;
  // Canonical updates the job's row; queue storage closes the attempt with a row in `closed`, or, for a
  // completion, a `completions` row holding the job's id among others.
  const [tables, match, timing, cond] = TEST_ENGINE === "canonical"
    ? [[`${s}.jobs`], "r.id = new.id", "before update", "old.state = 'running' and new.state <> 'running'"]
    : [
      [`"${client.schema}_qs".closed`, `"${client.schema}_qs".completions`],
      "(to_jsonb(new) -> 'job_id' = to_jsonb(r.id) or coalesce(to_jsonb(new) -> 'ids', '[]') @> to_jsonb(r.id))",
      "before insert",
      "true",
    ];
  // Lifting deletes the row the trigger reads: dropping a trigger on `closed` while claims run can
  // deadlock with them (it locks every partition).
  await client.sql.unsafe(
    `create table ${s}.test_refused (id bigint primary key);
     insert into ${s}.test_refused values (${id});
     create function ${s}.test_refuse() returns trigger language plpgsql as $$
     begin
       if ${cond} and exists (select 1 from ${s}.test_refused r where ${match}) then
         raise exception 'test: outcome write refused' using errcode = 'P0001';
       end if;
       return new;
     end $$;
     ${
      tables.map((t, i) =>
        `create trigger test_refuse_${i} ${timing} on ${t} for each row execute function ${s}.test_refuse();`
      )
        .join("\n")
    }`,
  );
  return async () => {
    await client.sql.unsafe(`delete from ${s}.test_refused`);
  };
}

async function abandonedNamed(client: Client): Promise<{ id: number; lease: number; reason: string }[]> {
  const rows = await client.sql.unsafe(
    `select health -> 'abandoned' as a from "${client.schema}".runtimes where health ? 'abandoned'`,
  );
  return rows.flatMap((r) => r.a ?? []);
}

for (const outcome of ["completion", "failure"] as const) {
  Deno.test(`a ${outcome} that cannot be written: the heartbeat names the attempt, the leader retries it before rescueAfter`, async () => {
    const { client, drop } = await testClient();
    let w: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      const job = await client.enqueue("a", {}, { maxAttempts: 3 });
      const lift = await refuseOutcomes(client, job.id);
      let runs = 0;
      const started = Date.now();
      w = await startWorker(client, {
        // Far beyond the test: a stale heartbeat (canonical) or a dead runtime cannot be the rescue here.
        rescueAfter: 120_000,
        heartbeatInterval: 200,
        handlers: {
          a: {
            handler: () => {
              runs++;
              if (runs === 1 && outcome === "failure") throw new Error("first attempt fails");
              return { runs };
            },
            backoff: () => 100,
          },
        },
      });
      // The refused write is given up at once (not a retryable error); the heartbeat names the attempt.
      const named = (await waitFor(
        async () => {
          const a = await abandonedNamed(client);
          return a.length ? a : null;
        },
        10_000,
        "the heartbeat to name the attempt",
      ))!;
      assert.equal(named.length, 1);
      assert.equal(named[0].id, job.id);
      assert.match(named[0].reason, /test: outcome write refused/);
      assert.equal((await client.getJob(job.id))!.state, "running", "still running in the database");
      // Once writes go through again the leader ends the attempt (retryable), and the job runs again.
      await lift();
      const done = (await waitFor(
        async () => {
          const j = await client.getJob(job.id);
          return j?.state === "completed" ? j : null;
        },
        15_000,
        "the job to be retried and complete",
      ))!;
      assert.ok(Date.now() - started < 60_000, "well before rescueAfter");
      assert.equal(done.attempt, 2);
      assert.equal(runs, 2);
      assert.equal(done.errors.length, 1);
      assert.match(done.errors[0].error, /^rescued: the worker .+ gave up on the attempt \(could not record/);
      assert.match(done.errors[0].error, /test: outcome write refused/);
      // The worker forgets it: the next heartbeats name nothing.
      await waitFor(async () => (await abandonedNamed(client)).length === 0, 5_000, "the list to empty");
    } finally {
      await w?.stop();
      await drop();
    }
  });
}

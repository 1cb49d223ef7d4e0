/**
 * `svc dev` as the README runs it (`deno task dev`, here with `--port 0` and a data directory of its
 * own): it starts a PostgreSQL server of its own and prints its DATABASE_URL, the UI address is
 * printed, the example jobs finish as they should (one through the HTTP function and the callback
 * receiver, one from the cron schedule), checked through the REST API; a second process uses the
 * printed DATABASE_URL (`svc job list`, and a worker of its own on another queue); a second `svc dev`
 * on the same folder is refused; SIGINT stops it (the server too) with exit code 0. Then restarted on
 * the same data, then `--fresh`; and on DATABASE_URL in a schema of its own.
 */
import assert from "node:assert/strict";
import { DATABASE_URL, dropSchema, freshSchema, waitFor } from "../helpers/db.ts";
import { type Proc, spawnDeno } from "../helpers/process.ts";
import { svc } from "../helpers/cli.ts";
import { answers, type DevRun, devTempDir, devUp, EMBEDDED, stopLeftoverServer } from "../helpers/dev.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
type Json = any;

/** `deno task dev --port 0 <args>` in the repository, as the README says; resolves once it is up. */
function devTask(args: string[], env: Record<string, string>): Promise<DevRun> {
  return devUp(spawnDeno(["task", "dev", "--port", "0", ...args], { cwd: ROOT, env }));
}

async function api(url: string, path: string): Promise<Json> {
  const res = await fetch(`${url}api${path}`);
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body;
}

/** Waits until one example job of each kind has finished, and checks how. */
async function checkExampleJobs(url: string): Promise<Record<string, Json>> {
  const finished = async () => {
    const { jobs } = await api(url, "/jobs?queue=dev&limit=500");
    const oldest = (kind: string, state: string) =>
      jobs.filter((j: Json) => j.kind === kind && j.state === state).sort((a: Json, b: Json) =>
        a.id - b.id
      )[0];
    const found: Record<string, Json> = {
      greet: oldest("dev.greet", "completed"),
      flaky: oldest("dev.flaky", "completed"),
      reject: oldest("dev.reject", "failed"),
      http: oldest("dev.http_greet", "completed"),
      cron: oldest("dev.cron_tick", "completed"),
    };
    return Object.values(found).every(Boolean) ? found : null;
  };
  const done = (await waitFor(finished, 60_000, "one example job of each kind to finish"))!;
  assert.match(done.greet.result.greeting, /^hello, /);
  assert.equal(done.flaky.attempt, 3, "retried twice, then succeeded");
  assert.deepEqual(done.flaky.errors.map((e: Json) => e.terminal), [false, false]);
  assert.equal(done.reject.attempt, 1, "a TerminalError fails at once");
  assert.equal(done.reject.errors[0].terminal, true);
  assert.match(done.http.result.greeting, /^hello from the function, /);
  const detail = await api(url, `/jobs/${done.http.id}`);
  assert.deepEqual(
    detail.callbacks.map((c: Json) => c.state),
    ["completed"],
    "completed through the receiver",
  );
  assert.ok(done.cron.metadata.cron_fire_at, "enqueued by the cron schedule");
  const { cron } = await api(url, "/cron");
  assert.deepEqual(cron.map((c: Json) => c.name), ["dev.every_10s"]);
  return done;
}

/** SIGINT, then a clean exit. */
async function interrupt(proc: Proc): Promise<void> {
  proc.child.kill("SIGINT");
  const status = await proc.status;
  assert.equal(status.code, 0, proc.lines.join("\n"));
  assert.ok(proc.lines.includes("svc dev: stopped"), proc.lines.join("\n"));
}

Deno.test("svc dev, embedded PostgreSQL: examples complete, a second process uses the printed DATABASE_URL, a second svc dev is refused, SIGINT exits 0 and stops the server; a restart finds the data; --fresh starts over", async (t) => {
  const dir = await devTempDir("svc-dev-");
  const dataDir = `${dir}/.svc-data`;
  let earlier: Record<string, Json> = {};
  let firstUrl = "";
  try {
    await t.step("first run", async () => {
      const { proc, url, databaseUrl } = await devTask(["--data-dir", dataDir], EMBEDDED);
      try {
        const out = proc.lines.join("\n");
        assert.match(out, /svc dev: initialized a new PostgreSQL data directory in .*\/pg \(\d+\.\d s\)/);
        assert.match(out, /svc dev: started PostgreSQL 18\.\d+ on 127\.0\.0\.1:\d+, .*\(\d+\.\d s\)/);
        assert.match(databaseUrl ?? "", /^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/, out);
        firstUrl = databaseUrl!;
        assert.equal((await fetch(url)).status, 200, "the UI is served");
        earlier = await checkExampleJobs(url);

        // A second process on the printed URL: the operator CLI sees svc dev's jobs.
        const env = { DATABASE_URL: databaseUrl!, SERVICE_SCHEMA: "" };
        const list = await svc(["job", "list", "--queue", "dev", "--json"], env);
        assert.equal(list.code, 0, list.stderr);
        assert.ok(JSON.parse(list.stdout).jobs.some((j: Json) => j.id === earlier.greet.id), list.stdout);

        // And a worker of its own, on its own queue, runs a job enqueued from a third process.
        const mine = spawnDeno(["run", "-A", `${ROOT}tests/fixtures/dev_user_worker.ts`], { env });
        try {
          await mine.waitLine(/^started$/, 60_000);
          const enq = await svc(
            ["job", "enqueue", "mine.echo", "--queue", "mine", "--args", '{"n":7}', "--json"],
            env,
          );
          assert.equal(enq.code, 0, enq.stderr);
          const id = JSON.parse(enq.stdout).id;
          const done = await waitFor(
            async () => {
              const r = await svc(["job", "get", String(id), "--json"], env);
              const job = r.code === 0 ? JSON.parse(r.stdout) : null;
              return job?.state === "completed" ? job : null;
            },
            30_000,
            "the own worker's job to complete",
          );
          assert.deepEqual(done.result, { echo: { n: 7 } });
        } finally {
          await mine.kill("SIGTERM");
        }

        const busy = await svc(["dev", "--port", "0", "--data-dir", dataDir], EMBEDDED);
        assert.equal(busy.code, 1);
        assert.equal(busy.stderr.trim().split("\n").length, 1, busy.stderr);
        assert.match(
          busy.stderr,
          /^error: .*\.svc-data is in use by another process \(another svc dev, its DATABASE_URL postgres:\/\/.*\); stop it, or pass another --data-dir$/m,
        );
      } finally {
        await interrupt(proc).finally(() => proc.kill());
      }
      assert.ok(
        proc.lines.some((l) => /^svc dev: stopped PostgreSQL \(\d+\.\d s\)$/.test(l)),
        proc.lines.join("\n"),
      );
      assert.equal(await answers(firstUrl), false, "the server stopped with svc dev");
      assert.equal(await exists(`${dataDir}/pg/postmaster.pid`), false, "a clean shutdown");
    });

    await t.step("restart on the same data (and the same port)", async () => {
      const { proc, url, databaseUrl } = await devTask(["--data-dir", dataDir], EMBEDDED);
      try {
        assert.ok(
          proc.lines.some((l) => /data in .* \(from the earlier runs;/.test(l)),
          proc.lines.join("\n"),
        );
        assert.ok(!proc.lines.some((l) => /initialized/.test(l)), proc.lines.join("\n"));
        assert.equal(databaseUrl, firstUrl, "the last run's port, free again, is taken again");
        const { job } = await api(url, `/jobs/${earlier.http.id}`);
        assert.equal(job.state, "completed");
        assert.deepEqual(job.result, earlier.http.result);
        assert.equal(job.created_at, earlier.http.created_at);
        for (
          const path of ["/stats", "/queues", "/kinds", "/cron", "/runtimes", "/storage", "/capabilities"]
        ) {
          await api(url, path);
        }
        const post = async (path: string) => {
          const res = await fetch(`${url}api${path}`, { method: "POST" });
          const text = await res.text();
          assert.equal(res.status, 200, `${path}: ${text}`);
          return JSON.parse(text);
        };
        assert.equal((await post(`/jobs/${earlier.reject.id}/retry`)).job.state, "available");
        assert.equal((await post("/queues/dev/pause")).queue.paused, true);
        assert.equal((await post("/queues/dev/resume")).queue.paused, false);
        assert.equal((await post("/cron/dev.every_10s/trigger")).job.kind, "dev.cron_tick");
      } finally {
        await interrupt(proc).finally(() => proc.kill());
      }
    });

    await t.step("--fresh", async () => {
      const started = Date.now();
      const { proc, url } = await devTask(["--data-dir", dataDir, "--fresh"], EMBEDDED);
      try {
        const out = proc.lines.join("\n");
        assert.match(out, /--fresh: deleted the earlier data/);
        assert.match(out, /initialized a new PostgreSQL data directory/);
        const { jobs } = await api(url, "/jobs?limit=500");
        assert.ok(
          jobs.every((j: Json) => Date.parse(j.created_at) >= started - 1000),
          "the earlier jobs are gone",
        );
      } finally {
        await interrupt(proc).finally(() => proc.kill());
      }
    });
  } finally {
    await stopLeftoverServer(dataDir); // after a failure that killed svc dev
    await Deno.remove(dir, { recursive: true });
  }
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("svc dev: a port in use fails at once, naming the fix", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const dir = await Deno.makeTempDir({ prefix: "svc-dev-" });
  try {
    const r = await svc(["dev", "--port", String(taken.addr.port), "--data-dir", dir], EMBEDDED);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /cannot listen on 127\.0\.0\.1:\d+ .*choose another --port/);
    assert.ok(r.ms < 10_000, `${r.ms} ms`);
    assert.ok(!(await exists(`${dir}/pg`)), "no server was started");
  } finally {
    taken.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("svc dev on DATABASE_URL: examples complete (one through the HTTP callback), SIGINT exits 0", async () => {
  const schema = freshSchema("dev");
  const env = { DATABASE_URL, SERVICE_SCHEMA: "", NO_COLOR: "1" };
  try {
    for (const flag of [["--fresh"], ["--pg-port", "5999"]]) {
      const refused = await svc(["dev", ...flag, "--schema", schema], env);
      assert.equal(refused.code, 2);
      assert.match(refused.stderr, new RegExp(`${flag[0]} is about the embedded PostgreSQL`));
    }

    const { proc, url } = await devTask(["--schema", schema], env);
    try {
      assert.ok(
        proc.lines.some((l) => l.includes(`svc dev: PostgreSQL at `) && l.includes(`schema ${schema}`)),
      );
      assert.ok(!proc.lines.some((l) => /^DATABASE_URL=|embedded/.test(l)), proc.lines.join("\n"));
      await checkExampleJobs(url);
      // The UI's enqueue form proposes the queue the dev worker serves.
      assert.equal((await api(url, "/capabilities")).default_queue, "dev");
      // Another site's page cannot change anything (its reads stay allowed).
      const foreign = await fetch(`${url}api/queues/dev/pause`, {
        method: "POST",
        headers: { origin: "https://evil.example" },
      });
      assert.equal(foreign.status, 403);
      assert.equal((await foreign.json()).code, "cross_origin");
      assert.equal((await api(url, "/queues")).queues.find((q: Json) => q.name === "dev").paused, false);
    } finally {
      await interrupt(proc).finally(() => proc.kill());
    }
  } finally {
    await dropSchema(schema);
  }
});

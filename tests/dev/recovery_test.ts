/**
 * `svc dev`'s embedded PostgreSQL after runs that did not stop cleanly, started as
 * `deno run -A cli.ts dev` so that a kill -9 hits svc itself:
 * - kill -9 of svc dev leaves its server running (in a session of its own); the next start stops that
 *   server and starts again on the same port and data;
 * - a stale `postmaster.pid` naming a live process that is not that server is removed;
 * - one naming a running postgres process of another server is refused, and that process left alone;
 * - the last run's port taken by something else: a free port instead, said so; `--pg-port` on a
 *   taken port is refused naming the fix;
 * - an older PGlite data folder is named with what to do about it; older binaries are removed.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { DATABASE_URL } from "../helpers/db.ts";
import { spawnDeno } from "../helpers/process.ts";
import { svc } from "../helpers/cli.ts";
import { answers, devTempDir, devUp, EMBEDDED, stopLeftoverServer } from "../helpers/dev.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

function devRun(dataDir: string, extra: string[] = []) {
  return devUp(
    spawnDeno(["run", "-A", CLI, "dev", "--port", "0", "--every", "0", "--data-dir", dataDir, ...extra], {
      env: EMBEDDED,
    }),
  );
}

function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT"); // a signal without effect: only whether the process exists
    return true;
  } catch {
    return false;
  }
}

async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await Deno.readTextFile(`${dataDir}/pg/postmaster.pid`)).split("\n")[0]);
}

async function gone(pid: number): Promise<void> {
  const until = Date.now() + 30_000;
  while (alive(pid)) {
    if (Date.now() > until) throw new Error(`process ${pid} still runs`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test("svc dev, embedded PostgreSQL: recovers after kill -9 (leftover server, stale postmaster.pid, port in use)", async (t) => {
  const dir = await devTempDir("svc-dev-recovery-");
  const dataDir = `${dir}/.svc-data`;
  let url = "";
  let jobId = 0;
  const sleeper = new Deno.Command("sleep", { args: ["600"] }).spawn(); // a live process that is no server
  try {
    await t.step("kill -9 of svc dev: the next start stops the leftover server", async () => {
      const first = await devRun(dataDir);
      url = first.databaseUrl!;
      const enq = await svc(["job", "enqueue", "kept", "--queue", "other", "--json"], { DATABASE_URL: url });
      assert.equal(enq.code, 0, enq.stderr);
      jobId = JSON.parse(enq.stdout).id;
      await first.proc.kill("SIGKILL");
      const leftover = await postmasterPid(dataDir);
      assert.ok(alive(leftover) && await answers(url), "the server outlives svc dev");

      const next = await devRun(dataDir);
      try {
        assert.ok(
          next.proc.lines.some((l) =>
            l.startsWith(
              `svc dev: stopped the PostgreSQL server (pid ${leftover}) left running by an earlier run`,
            )
          ),
          next.proc.lines.join("\n"),
        );
        assert.equal(alive(leftover), false);
        assert.equal(next.databaseUrl, url, "the same port again");
        const got = await svc(["job", "get", String(jobId), "--json"], { DATABASE_URL: url });
        assert.equal(got.code, 0, got.stderr);
        assert.equal(JSON.parse(got.stdout).kind, "kept", "the data survived");
      } finally {
        await next.proc.kill("SIGKILL");
      }
    });

    await t.step(
      "a stale postmaster.pid naming a live process that is not the server is removed",
      async () => {
        // The run above was killed too: stop its server by hand, then leave a postmaster.pid behind
        // whose pid is alive but belongs to another program (a pid reused after a reboot).
        const leftover = await postmasterPid(dataDir);
        Deno.kill(leftover, "SIGINT");
        await gone(leftover);
        const port = new URL(url).port;
        await Deno.writeTextFile(
          `${dataDir}/pg/postmaster.pid`,
          `${sleeper.pid}\n${dataDir}/pg\n0\n${port}\n\n127.0.0.1\n0 0\nready\n`,
        );
        const next = await devRun(dataDir);
        try {
          assert.ok(
            next.proc.lines.some((l) => l.includes("removed the stale postmaster.pid")),
            next.proc.lines.join("\n"),
          );
          assert.ok(alive(sleeper.pid), "the other program is left alone");
          assert.equal(next.databaseUrl, url);
          next.proc.child.kill("SIGINT");
          assert.equal((await next.proc.status).code, 0, next.proc.lines.join("\n"));
        } finally {
          await next.proc.kill();
        }
      },
    );

    await t.step(
      "a postmaster.pid naming another server's running postgres process: refused, that process left alone",
      async () => {
        const other = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
        try {
          const [{ pid }] = await other`select pg_backend_pid() as pid`;
          await Deno.writeTextFile(`${dataDir}/pg/postmaster.pid`, `${pid}\n/elsewhere\n0\n5432\n`);
          const r = await svc(["dev", "--port", "0", "--data-dir", dataDir], EMBEDDED);
          assert.equal(r.code, 1, r.stdout + r.stderr);
          assert.match(
            r.stderr,
            new RegExp(
              `^error: .*postmaster\\.pid names pid ${pid}, a running postgres .*; stop it, then start again$`,
              "m",
            ),
          );
          const [{ ok }] = await other`select 1 as ok`;
          assert.equal(ok, 1, "the other server's session was not touched");
        } finally {
          await other.end();
          await Deno.remove(`${dataDir}/pg/postmaster.pid`).catch(() => {});
        }
      },
    );

    await t.step(
      "the last port in use: another port, said so; --pg-port on it is refused; old PGlite data is named",
      async () => {
        const port = Number(new URL(url).port);
        const taken = Deno.listen({ hostname: "127.0.0.1", port });
        await Deno.mkdir(`${dataDir}/pgdata`);
        await Deno.writeTextFile(`${dataDir}/pgdata/PG_VERSION`, "17\n");
        // The binaries of an older package version, left from before an upgrade: removed at the start.
        await Deno.mkdir(`${dataDir}/postgresql-18.0.0-old/bin`, { recursive: true });
        try {
          const refused = await svc(
            ["dev", "--port", "0", "--data-dir", dataDir, "--pg-port", String(port)],
            EMBEDDED,
          );
          assert.equal(refused.code, 1);
          assert.match(
            refused.stderr,
            new RegExp(`^error: port ${port} on 127\\.0\\.0\\.1 is in use; choose another --pg-port`, "m"),
          );
          const next = await devRun(dataDir);
          try {
            const out = next.proc.lines.join("\n");
            assert.match(out, new RegExp(`the port of the last run, ${port}, is in use`));
            assert.match(out, /pgdata holds the data of an earlier svc dev \(PGlite, in-process\)/);
            assert.notEqual(next.databaseUrl, url);
            assert.ok(await answers(next.databaseUrl!));
            await assert.rejects(Deno.stat(`${dataDir}/postgresql-18.0.0-old`), "older binaries removed");
            next.proc.child.kill("SIGINT");
            assert.equal((await next.proc.status).code, 0, out);
          } finally {
            await next.proc.kill();
          }
        } finally {
          taken.close();
        }
      },
    );
  } finally {
    sleeper.kill("SIGKILL");
    await sleeper.status;
    await stopLeftoverServer(dataDir); // a failed step may leave a server behind
    await Deno.remove(dir, { recursive: true });
  }
});

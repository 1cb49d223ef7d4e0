/**
 * Every operator command as a real process against a real database, with its error cases: exit codes
 * 0/1/2, one-line errors naming the fix, `--json` that parses, `--help` everywhere.
 */
import assert from "node:assert/strict";
import { backdateAvailable, freshSchema, TEST_ENGINE, TEST_TRANSITION, testClient } from "../helpers/db.ts";
import { setState } from "../helpers/admin.ts";
import { type CliRun, svc, svcIn } from "../helpers/cli.ts";
import { closedPort } from "../helpers/http.ts";

/** Asserts a failure: the exit code and one `error: ...` line on stderr matching `re`. */
function fails(r: CliRun, code: number, re: RegExp): void {
  assert.equal(r.code, code, `exit ${r.code}, stdout ${r.stdout}, stderr ${r.stderr}`);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line on stderr: ${JSON.stringify(r.stderr)}`);
  assert.match(lines[0], /^error: /);
  assert.match(lines[0], re);
}

function ok(r: CliRun): string {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  assert.equal(r.stderr, "");
  return r.stdout;
}

Deno.test("every command and group has --help (exit 0)", async () => {
  const commands = [
    [],
    ["migrate"],
    ["health"],
    ["job"],
    ["job", "list"],
    ["job", "get"],
    ["job", "enqueue"],
    ["job", "retry"],
    ["job", "cancel"],
    ["job", "retry-failed"],
    ["queue"],
    ["queue", "list"],
    ["queue", "pause"],
    ["queue", "resume"],
    ["cron"],
    ["cron", "list"],
    ["cron", "add"],
    ["cron", "trigger"],
    ["cron", "pause"],
    ["cron", "resume"],
    ["cron", "remove"],
    ["storage"],
    ["storage", "status"],
  ];
  const runs = await Promise.all(commands.map((c) => svc([...c, "--help"])));
  runs.forEach((r, i) => {
    assert.equal(r.code, 0, commands[i].join(" "));
    assert.match(r.stdout, /^Usage: svc/, commands[i].join(" "));
  });
  assert.match(runs[0].stdout, /health .*\n.*job .*\n.*queue .*\n.*cron .*\n.*storage/s);
});

Deno.test("svc job: enqueue, list, get, retry, cancel, retry-failed, with their errors", async () => {
  const { client, schema, drop } = await testClient();
  const run = (...a: string[]) => svcIn(schema, ["job", ...a]);
  try {
    // enqueue: text and --json; every option.
    assert.match(
      ok(await run("enqueue", "send_email", "--args", '{"to":"a@example.com"}')),
      /^enqueued job 1 \(send_email on queue default, available, run at /,
    );
    const j = JSON.parse(ok(
      await run(
        "enqueue",
        "report",
        "--args",
        "{}",
        "--queue",
        "reports",
        "--priority",
        "1",
        "--max-attempts",
        "3",
        "--run-at",
        "2099-01-01T09:00:00Z",
        "--json",
      ),
    ));
    assert.equal(j.id, 2);
    assert.equal(j.state, "scheduled");
    assert.equal(j.queue, "reports");
    assert.equal(j.priority, 1);
    assert.equal(j.max_attempts, 3);
    assert.equal(j.run_at, "2099-01-01T09:00:00.000Z");
    fails(
      await run("enqueue", "x", "--args", "{bad"),
      2,
      /--args is not valid JSON .*pass an object such as/,
    );
    fails(await run("enqueue", "x", "--args", "[1,2]"), 2, /--args must be a JSON object/);
    fails(await run("enqueue", "x", "--priority", "9"), 2, /--priority must be an integer from 1 to 4/);
    fails(
      await run("enqueue", "x", "--run-at", "tomorrow"),
      2,
      /--run-at must be an RFC 3339 time with a zone/,
    );
    fails(await run("enqueue", "x", "--run-at", "2026-12-01T09:00:00"), 2, /with a zone/);
    fails(await run("enqueue", "x", "--queue", "no spaces"), 2, /invalid queue name "no spaces"/);
    fails(await run("enqueue"), 2, /missing required argument 'kind'/);

    // list: text, filters, --json with a cursor.
    const text = ok(await run("list"));
    assert.match(
      text,
      /^ID\s+KIND\s+QUEUE\s+STATE\s+ATTEMPT\s+RUN AT\s+LAST ERROR\n2\s+report\s+reports\s+scheduled\s+0\/3/,
    );
    assert.match(text, /\n1\s+send_email\s+default\s+available\s+0\/25/);
    const page1 = JSON.parse(ok(await run("list", "--limit", "1", "--json")));
    assert.deepEqual(page1.jobs.map((x: { id: number }) => x.id), [2]);
    assert.equal(typeof page1.next_cursor, "string");
    const page2 = JSON.parse(ok(await run("list", "--limit", "1", "--cursor", page1.next_cursor, "--json")));
    assert.deepEqual(page2.jobs.map((x: { id: number }) => x.id), [1]);
    assert.equal(page2.next_cursor, null);
    const filtered = JSON.parse(
      ok(
        await run(
          "list",
          "--state",
          "available,running",
          "--kind",
          "send_email",
          "--queue",
          "default",
          "--json",
        ),
      ),
    );
    assert.deepEqual(filtered.jobs.map((x: { id: number }) => x.id), [1]);
    assert.equal(ok(await run("list", "--kind", "nothing")), "no jobs match\n");
    fails(
      await run("list", "--state", "done"),
      2,
      /unknown state "done"; use one or more of scheduled, available/,
    );
    fails(await run("list", "--limit", "0"), 2, /--limit must be an integer from 1 to 1000/);

    // get
    assert.match(
      ok(await run("get", "1")),
      /^id: 1\nkind: send_email\nqueue: default\nargs: \{"to":"a@example.com"\}\nstate: available\n/,
    );
    assert.equal(JSON.parse(ok(await run("get", "1", "--json"))).args.to, "a@example.com");
    fails(await run("get", "999"), 1, /job 999 not found; check the id with `svc job list`/);
    fails(await run("get", "abc"), 2, /job id must be an integer/);

    // retry of a job that has not finished is refused; cancel, then retry.
    fails(
      await run("retry", "1"),
      1,
      /job 1 is available: only a completed, failed or cancelled job can be retried; .*svc job cancel 1/,
    );
    assert.equal(ok(await run("cancel", "1")), "job 1 cancelled\n");
    fails(
      await run("cancel", "1"),
      1,
      /job 1 is cancelled: only a job that has not finished can be cancelled; .*svc job retry 1/,
    );
    assert.equal(JSON.parse(ok(await run("retry", "1", "--json"))).state, "available");
    fails(await run("retry", "999"), 1, /job 999 not found; check the id with `svc job list`/);
    fails(await run("cancel", "999"), 1, /job 999 not found/);

    // retry-failed, optionally by kind and queue.
    const toFail = await client.enqueueMany([{ kind: "a", args: {} }, { kind: "a", args: {} }, {
      kind: "b",
      args: {},
      queue: "other",
    }]);
    await setState(client, toFail.map((j) => j.id), "failed");
    assert.equal(ok(await run("retry-failed", "--kind", "a")), "retried 2 failed jobs\n");
    assert.deepEqual(JSON.parse(ok(await run("retry-failed", "--queue", "nothing", "--json"))), { count: 0 });
    assert.equal(ok(await run("retry-failed")), "retried 1 failed job\n");
    assert.equal((await client.listJobs({ state: "failed" })).jobs.length, 0);
  } finally {
    await drop();
  }
});

Deno.test("svc queue: list with counts, paused and age; pause; resume", async () => {
  const { client, schema, drop } = await testClient();
  const run = (...a: string[]) => svcIn(schema, ["queue", ...a]);
  try {
    assert.equal(
      ok(await run("list")),
      "no queues yet (a queue appears with its first job or when paused)\n",
    );
    assert.deepEqual(JSON.parse(ok(await run("list", "--json"))), { queues: [] });
    await client.enqueueMany([{ kind: "k", queue: "mail" }, { kind: "k", queue: "mail" }, {
      kind: "k",
      queue: "reports",
      runAt: new Date(Date.now() + 3_600_000),
    }]);
    await backdateAvailable(client, "mail", "90 seconds");

    assert.equal(ok(await run("pause", "mail")), "queue mail paused\n");
    const { queues } = JSON.parse(ok(await run("list", "--json")));
    assert.deepEqual(queues.map((q: { name: string }) => q.name), ["mail", "reports"]);
    assert.equal(queues[0].paused, true);
    assert.equal(queues[0].counts.available, 2);
    assert.equal(queues[0].counts.failed, 0);
    assert.deepEqual(Object.keys(queues[0].counts).sort(), [
      "available",
      "cancelled",
      "completed",
      "failed",
      "retryable",
      "running",
      "scheduled",
      "waiting_external",
    ]);
    assert.ok(queues[0].oldest_available_age_seconds >= 89, String(queues[0].oldest_available_age_seconds));
    assert.equal(queues[1].paused, false);
    assert.equal(queues[1].counts.scheduled, 1);
    assert.equal(queues[1].oldest_available_age_seconds, null);
    const text = ok(await run("list"));
    assert.match(
      text,
      /^QUEUE\s+PAUSED\s+AVAILABLE\s+SCHEDULED\s+RUNNING\s+WAITING\s+RETRYABLE\s+COMPLETED\s+FAILED\s+CANCELLED\s+OLDEST\s+RUNTIMES\s+LIMIT\s+NOT RUN\n/,
    );
    assert.match(
      text,
      /\nmail\s+yes\s+2\s+0\s+0\s+0\s+0\s+0\s+0\s+0\s+(89|9\d|1\d\d)s\s+0\s+-\s+no live runtime serves this queue\n/,
    );
    assert.match(text, /\nreports\s+no\s+0\s+1\s+.*-\s+0\s+-\s+-\n$/);

    assert.equal(ok(await run("resume", "mail")), "queue mail resumed\n");
    assert.equal(JSON.parse(ok(await run("list", "--json"))).queues[0].paused, false);
    fails(await run("pause", "bad name!"), 2, /invalid queue name "bad name!": use 1 to 48 characters/);
    fails(await run("pause"), 2, /missing required argument 'name'/);
  } finally {
    await drop();
  }
});

Deno.test("svc cron: add, list, trigger, pause, resume, remove, with invalid expressions and unknown names", async () => {
  const { client, schema, drop } = await testClient();
  const run = (...a: string[]) => svcIn(schema, ["cron", ...a]);
  try {
    assert.match(ok(await run("list")), /^no cron schedules/);
    assert.deepEqual(JSON.parse(ok(await run("list", "--json"))), { cron: [] });

    assert.match(
      ok(
        await run(
          "add",
          "nightly",
          "--schedule",
          "0 3 * * *",
          "--timezone",
          "Europe/Berlin",
          "--kind",
          "report",
          "--args",
          '{"full":true}',
          "--queue",
          "reports",
        ),
      ),
      /^cron nightly saved; next fire: \d{4}-\d\d-\d\dT0[12]:00:00Z\n$/,
    );
    const added = JSON.parse(
      ok(
        await run(
          "add",
          "every_second",
          "--schedule",
          "*/10 * * * * *",
          "--kind",
          "tick",
          "--catch-up",
          "5",
          "--json",
        ),
      ),
    );
    assert.equal(added.cron.catch_up, 5);
    assert.equal(added.cron.declared_by, "cli");
    fails(
      await run("add", "bad", "--schedule", "0 3 * *", "--kind", "k"),
      2,
      /invalid cron schedule "0 3 \* \*": it has 4 fields; expected 5 fields/,
    );
    fails(
      await run("add", "bad", "--schedule", "61 * * * *", "--kind", "k"),
      2,
      /invalid cron schedule "61 \* \* \* \*"/,
    );
    fails(await run("add", "bad", "--schedule", "0 0 30 2 *", "--kind", "k"), 2, /it never fires/);
    fails(
      await run("add", "bad", "--schedule", "0 3 * * *", "--kind", "k", "--timezone", "Mars/Base"),
      2,
      /unknown time zone "Mars\/Base": use an IANA name/,
    );
    fails(
      await run("add", "bad", "--schedule", "0 3 * * *"),
      2,
      /required option '--kind <kind>' not specified/,
    );
    fails(
      await run("add", "bad", "--schedule", "0 3 * * *", "--kind", "k", "--args", "nope"),
      2,
      /--args is not valid JSON/,
    );
    fails(
      await run("add", "bad name", "--schedule", "0 3 * * *", "--kind", "k"),
      2,
      /invalid cron schedule name "bad name"/,
    );

    const list = JSON.parse(ok(await run("list", "--json"))).cron;
    assert.deepEqual(list.map((c: { name: string }) => c.name), ["every_second", "nightly"]);
    const nightly = list[1];
    for (
      const k of [
        "name",
        "schedule",
        "kind",
        "args",
        "queue",
        "timezone",
        "paused",
        "last_fire_at",
        "next_fire_at",
      ]
    ) {
      assert.ok(k in nightly, k);
    }
    assert.deepEqual(nightly.args, { full: true });
    assert.equal(nightly.timezone, "Europe/Berlin");
    assert.equal(nightly.last_fire_at, null);
    assert.match(
      ok(await run("list")),
      /^NAME\s+SCHEDULE\s+TIMEZONE\s+KIND\s+QUEUE\s+PAUSED\s+LAST FIRE\s+NEXT FIRE\s+DECLARED BY\n/,
    );

    const triggered = ok(await run("trigger", "nightly"));
    assert.match(triggered, /^cron nightly: enqueued job (\d+) \(report on queue reports\)\n$/);
    const id = Number(/job (\d+)/.exec(triggered)![1]);
    assert.deepEqual((await client.getJob(id))?.metadata, { cron: "nightly", cron_trigger: "manual" });
    assert.equal(JSON.parse(ok(await run("trigger", "nightly", "--json"))).job.kind, "report");

    assert.equal(ok(await run("pause", "nightly")), "cron nightly paused; next fire: -\n");
    assert.equal(JSON.parse(ok(await run("pause", "nightly", "--json"))).cron.paused, true);
    assert.match(ok(await run("resume", "nightly")), /^cron nightly resumed; next fire: \d{4}-/);
    assert.equal((await client.getCron("nightly"))?.paused, false);
    assert.equal(ok(await run("remove", "nightly")), "cron nightly removed\n");
    assert.equal(await client.getCron("nightly"), null);
    for (const verb of ["trigger", "pause", "resume", "remove"]) {
      fails(
        await run(verb, "nightly"),
        1,
        /cron schedule "nightly" not found; list the schedules with `svc cron list`/,
      );
    }
  } finally {
    await drop();
  }
});

Deno.test("svc storage status: state, backlog, runtimes, blockers and next step, text and --json", async () => {
  const { schema, drop } = await testClient();
  try {
    const canonical = TEST_ENGINE === "canonical";
    const text = ok(await svcIn(schema, ["storage", "status"]));
    assert.equal(
      text,
      [
        `state: ${TEST_TRANSITION}`,
        `engine (new writes): ${TEST_ENGINE}`,
        "canonical backlog: 0 unfinished jobs",
        `queue storage: ready (schema ${schema}_qs)`,
        "live runtimes: 0 can execute queue storage, 0 only canonical",
        "blockers: none",
        "abort possible: " + (canonical ? "yes" : "no"),
        "next step: " + (canonical ? "svc storage prepare" : "none (the transition is finished)"),
        "",
      ].join("\n"),
    );
    assert.deepEqual(JSON.parse(ok(await svcIn(schema, ["storage", "status", "--json"]))), {
      state: TEST_TRANSITION,
      transition: TEST_TRANSITION,
      engine: TEST_ENGINE,
      prepared_engine: null,
      canonical_backlog: 0,
      queue_storage_ready: true,
      queue_storage_schema: `${schema}_qs`,
      runtimes: { canonical_only: 0, queue_storage_capable: 0 },
      blockers: [],
      abort_possible: canonical,
      next_step: canonical ? "svc storage prepare" : null,
    });
  } finally {
    await drop();
  }
});

Deno.test("an unmigrated database: each command says to run `svc migrate`; migrate --status and migrate work", async () => {
  const schema = freshSchema("cli_unmig");
  try {
    for (
      const args of [["job", "list"], ["job", "get", "1"], ["queue", "list"], ["cron", "list"], [
        "storage",
        "status",
      ]]
    ) {
      fails(await svcIn(schema, args), 1, /svc is not installed in this database .*run `svc migrate` first/);
    }
    // Pending migrations: the status is printed, and the exit code is 1.
    const pending = await svcIn(schema, ["migrate", "--status", "--json"]);
    assert.equal(pending.code, 1, pending.stderr);
    const status = JSON.parse(pending.stdout);
    assert.equal(status.current_version, null);
    assert.match(
      ok(await svcIn(schema, ["migrate", "--engine", TEST_ENGINE])),
      new RegExp(`migrated schema ${schema} from version 0 to ${status.expected_version}`),
    );
    assert.match(ok(await svcIn(schema, ["migrate", "--engine", TEST_ENGINE])), /already at version/);
    assert.equal(ok(await svcIn(schema, ["job", "list"])), "no jobs match\n");
    // The engine and the queue-storage parameters are fixed once installed: asking for others is a usage error.
    const other = TEST_ENGINE === "canonical" ? "queue_storage" : "canonical";
    for (
      const [args, re] of [
        [["--engine", other], /applies only to a new database/],
        [["--qs-slots", "16"], /--qs-slots 16 differs from the installed 8/],
        [["--qs-rotation-interval", "60"], /--qs-rotation-interval 60 s differs from the installed 30 s/],
        [["--qs-schema", `${schema}_other`], /differs from the installed/],
      ] as const
    ) {
      const r = await svcIn(schema, ["migrate", ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout} ${r.stderr}`);
      assert.match(r.stderr, re);
    }
    assert.match(ok(await svcIn(schema, ["migrate", "--qs-slots", "8"])), /already at version/);
  } finally {
    const { drop } = await testClient({ schema });
    await drop();
  }
});

Deno.test("an unreachable database: every command exits 1 with one line naming the fix", async () => {
  const url = `postgres://postgres@127.0.0.1:${closedPort()}/postgres`;
  const commands = [
    ["migrate"],
    ["migrate", "--status"],
    ["job", "list"],
    ["job", "get", "1"],
    ["job", "enqueue", "k"],
    ["job", "retry", "1"],
    ["job", "cancel", "1"],
    ["job", "retry-failed"],
    ["queue", "list"],
    ["queue", "pause", "q"],
    ["queue", "resume", "q"],
    ["cron", "list"],
    ["cron", "add", "c", "--schedule", "0 3 * * *", "--kind", "k"],
    ["cron", "trigger", "c"],
    ["cron", "pause", "c"],
    ["cron", "resume", "c"],
    ["cron", "remove", "c"],
    ["storage", "status"],
  ];
  // The URL before the command for half of them, on the command for the rest, DATABASE_URL for one.
  const runs = await Promise.all(
    commands.map((c, i) =>
      i === 0
        ? svc(c, { DATABASE_URL: url })
        : i % 2
        ? svc(["--database-url", url, ...c])
        : svc([...c, "--database-url", url])
    ),
  );
  // Refused at once (ECONNREFUSED), not after the connect timeout.
  runs.forEach((r) =>
    fails(
      r,
      1,
      /cannot reach the database \(.*ECONNREFUSED.*\); check --database-url \/ DATABASE_URL and that PostgreSQL is running/,
    )
  );
  // No database at all is a usage error.
  fails(
    await svc(["job", "list"], { DATABASE_URL: "" }),
    2,
    /no database: pass --database-url .* or set DATABASE_URL/,
  );
});

Deno.test("a command uses one database connection and closes it", async () => {
  const { client, schema, drop } = await testClient();
  const active = async () => {
    const [r] = await client.sql.unsafe(
      `select count(*)::int as n from pg_stat_activity
        where application_name = 'svc' and state = 'active' and pid <> pg_backend_pid() and query like $1`,
      [`%"${schema}".%`],
    );
    return r.n as number;
  };
  try {
    // While a transaction holds a lock on the storage state, `job list` waits on it: count its connections.
    let pending!: Promise<CliRun>;
    let seen = 0;
    await client.sql.begin(async (tx) => {
      await tx.unsafe(`lock table "${schema}".storage_state in access exclusive mode`);
      pending = svcIn(schema, ["job", "list", "--json"]);
      for (let i = 0; i < 200 && seen === 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        seen = await active();
      }
    });
    assert.equal(seen, 1, "one connection");
    assert.deepEqual(JSON.parse(ok(await pending)), { jobs: [], next_cursor: null });
    assert.equal(await active(), 0, "closed when the command exits");
  } finally {
    await drop();
  }
});

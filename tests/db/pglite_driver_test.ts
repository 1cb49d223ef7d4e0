/**
 * The embedded driver (PGlite, one session, in-process): values come back as postgres.js gives them,
 * transactions never interleave, a nested begin is a savepoint, NOTIFY reaches in-process listeners
 * at commit only, a statement outside an open transaction throws instead of hanging, and the data
 * directory is locked to one process and survives a reopen.
 */
import assert from "node:assert/strict";
import { DataDirBusyError, openPglite } from "../../src/db/pglite_driver.ts";

Deno.test("pglite driver: one in-memory database", async (t) => {
  const { driver: d } = await openPglite();
  try {
    await t.step("values as postgres.js returns them (int8 number, Date, jsonb, arrays, uuid)", async () => {
      const { db } = d;
      const [r] = await db.query(
        `select $1::bigint as big, count(*) as n, now() as at, '{"a":[1]}'::jsonb as j, $2::text[] as tags,
                array_agg(x)::bigint[] as ids, gen_random_uuid() as u, $3::boolean as b, 1.5::numeric as num
           from generate_series(1, 3) x`,
        [12, ["a", "b,c"], true],
      );
      assert.equal(r.big, 12);
      assert.equal(r.n, 3);
      assert.ok(r.at instanceof Date);
      assert.deepEqual(r.j, { a: [1] });
      assert.deepEqual(r.tags, ["a", "b,c"]);
      assert.deepEqual(r.ids, [1, 2, 3]);
      assert.match(r.u, /^[0-9a-f-]{36}$/);
      assert.equal(r.b, true);
      assert.equal(r.num, "1.5", "numeric stays a string, as with postgres.js");
      const rows = await db.query(
        `select * from jsonb_to_recordset($1::text::jsonb) as u(id bigint, lease integer, result jsonb)`,
        [JSON.stringify([{ id: 7, lease: 2, result: { ok: true } }])],
      );
      assert.deepEqual(rows, [{ id: 7, lease: 2, result: { ok: true } }]);
    });

    await t.step(
      "two transactions never interleave; plain statements wait for an open transaction",
      async () => {
        await d.db.exec("create table log (tx text, step int, at serial)");
        const trace: string[] = [];
        const tx = (name: string) =>
          d.transaction(async (t) => {
            for (let step = 0; step < 3; step++) {
              await t.query("insert into log (tx, step) values ($1, $2)", [name, step]);
              trace.push(name);
              await new Promise((r) => setTimeout(r, 5));
            }
          });
        await Promise.all([tx("a"), tx("b"), d.db.query("insert into log (tx, step) values ('plain', 0)")]);
        const seq = (await d.db.query("select tx from log order by at")).map((r) => r.tx.slice(0, 1)).join(
          "",
        );
        assert.match(seq, /^(aaa|bbb|p){3}$/, `each transaction's rows are contiguous: ${seq}`);
        assert.equal(trace.join(""), seq.replace("p", ""));
      },
    );

    await t.step("nested begin is a savepoint; a throw rolls back only its part", async () => {
      const { db } = d;
      await db.exec("create table t (v int)");
      await db.begin(async (tx) => {
        await tx.query("insert into t values (1)");
        await assert.rejects(
          tx.begin(async (inner) => {
            await inner.query("insert into t values (2)");
            throw new Error("inner fails");
          }),
          /inner fails/,
        );
        await tx.begin((inner) => inner.query("insert into t values (3)"));
      });
      await assert.rejects(db.begin(async (tx) => {
        await tx.query("insert into t values (4)");
        throw new Error("outer fails");
      }));
      assert.deepEqual((await db.query("select v from t order by v")).map((r) => r.v), [1, 3]);
    });

    await t.step("the pool used inside an open transaction throws instead of waiting forever", async () => {
      await assert.rejects(
        d.transaction(async () => {
          await d.db.query("select 1");
        }),
        /one session/,
      );
      assert.deepEqual(
        await d.db.query("select 1 as one"),
        [{ one: 1 }],
        "the driver still works afterwards",
      );
    });

    await t.step("NOTIFY reaches in-process listeners at commit, never from a rollback", async () => {
      const got: string[] = [];
      const unlisten = await d.listen("svc_jobs", (p) => got.push(p));
      await d.db.query("select pg_notify('svc_jobs', 'direct')");
      await d.transaction(async (tx) => {
        await tx.query("select pg_notify('svc_jobs', 'in-tx')");
        assert.deepEqual(got, ["direct"], "not before commit");
      });
      await assert.rejects(d.transaction(async (tx) => {
        await tx.query("select pg_notify('svc_jobs', 'rolled-back')");
        throw new Error("roll back");
      }));
      await unlisten();
      await d.db.query("select pg_notify('svc_jobs', 'after-unlisten')");
      assert.deepEqual(got, ["direct", "in-tx"]);
    });
  } finally {
    await d.close();
  }
});

Deno.test("pglite driver: the data directory is locked to one opener and keeps its data across a reopen", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-pglite-" });
  try {
    const first = await openPglite(dir);
    assert.equal(first.existed, false);
    try {
      await first.driver.db.exec("create table kept (v text); insert into kept values ('hello')");
      await assert.rejects(openPglite(dir), DataDirBusyError);
      assert.equal(await first.driver.leaderLock(1).tryAcquire(), true, "embedded: this process leads");
    } finally {
      await first.driver.close();
    }
    const again = await openPglite(dir);
    try {
      assert.equal(again.existed, true);
      assert.deepEqual(await again.driver.db.query("select v from kept"), [{ v: "hello" }]);
    } finally {
      await again.driver.close();
    }
    const fresh = await openPglite(dir, { fresh: true });
    try {
      assert.equal(fresh.existed, false);
      assert.deepEqual(await fresh.driver.db.query("select to_regclass('kept') as t"), [{ t: null }]);
    } finally {
      await fresh.driver.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

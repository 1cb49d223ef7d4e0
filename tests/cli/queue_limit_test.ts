/** `svc queue limit` and the LIMIT column of `svc queue list`, as real processes against a real database. */
import assert from "node:assert/strict";
import { TEST_ENGINE, testClient } from "../helpers/db.ts";
import { svcIn } from "../helpers/cli.ts";

Deno.test("svc queue limit: set a rate, show it, list it, clear and reset; bad values exit 2 and change nothing", async () => {
  const { client, schema, drop } = await testClient();
  try {
    await client.enqueue("a", {}, { queue: "mail" });
    const none = await svcIn(schema, ["queue", "limit", "mail"]);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /^queue mail has no limits$/m);

    const set = await svcIn(schema, ["queue", "limit", "mail", "--rate", "20/1s"]);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /^queue mail: rate 20\/1s \(0 in window(, counting)?\)$/m);
    // "counting" while the first window since the change has not passed: the whole command ran within it
    // unless the machine is slow.
    if (set.ms < 1_000) assert.match(set.stdout, /\(0 in window, counting\)$/m);
    assert.match(set.stdout, /enforced from \S+ \(one window later\)/);
    const [row] = await client.listQueueLimits();
    assert.deepEqual([row.rate, row.per, row.setBy], [20, 1000, "cli"]);

    const json = JSON.parse((await svcIn(schema, ["queue", "limit", "mail", "--json"])).stdout);
    assert.equal(json.limit.rate, 20);
    assert.equal(json.limit.per_ms, 1000);

    const list = await svcIn(schema, ["queue", "list"]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout.split("\n")[0], /\bLIMIT\b/);
    assert.match(list.stdout, /^mail .*rate 20\/1s \(0 in window/m);
    const listJson = JSON.parse((await svcIn(schema, ["queue", "list", "--json"])).stdout);
    assert.equal(listJson.queues[0].limit.rate, 20);

    for (
      const [args, re] of [
        [["--rate", "20"], /--rate must be COUNT\/WINDOW/],
        [["--rate", "0/1s"], /--rate must be COUNT\/WINDOW/],
        [["--rate", "5/25h"], /--rate must be COUNT\/WINDOW/],
        [["--per-key", "0"], /--per-key must be an integer from 1/],
        [["--concurrency", "0"], /--concurrency must be an integer from 1/],
        [["--rate", "5/1s", "--reset"], /not more than one/],
      ] as [string[], RegExp][]
    ) {
      const r = await svcIn(schema, ["queue", "limit", "mail", ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, re, args.join(" "));
    }
    assert.equal((await client.listQueueLimits())[0].rate, 20, "refused values changed nothing");

    // A per-key limit needs queue storage: refused on canonical.
    const perKey = await svcIn(schema, ["queue", "limit", "mail", "--per-key", "3", "--rate", "20/1s"]);
    if (TEST_ENGINE === "queue_storage") {
      assert.equal(perKey.code, 0, perKey.stderr);
      assert.match(perKey.stdout, /per key 3 \(0 keys in use\)/);
    } else {
      assert.equal(perKey.code, 2, perKey.stdout);
      assert.match(perKey.stderr, /per-key limits need queue storage/);
    }

    const minute = await svcIn(schema, ["queue", "limit", "mail", "--rate", "100/m"]);
    assert.match(minute.stdout, /rate 100\/1m/);
    const cleared = await svcIn(schema, ["queue", "limit", "mail", "--clear"]);
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.match(cleared.stdout, /^queue mail: none \(kept\)$/m);
    const reset = await svcIn(schema, ["queue", "limit", "mail", "--reset", "--json"]);
    assert.deepEqual(JSON.parse(reset.stdout), { reset: true });
    assert.deepEqual(await client.listQueueLimits(), []);
  } finally {
    await drop();
  }
});

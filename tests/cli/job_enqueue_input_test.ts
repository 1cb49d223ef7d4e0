/**
 * `svc job enqueue` takes its args inline (`--args`), from a file (`--args-file`) or from standard
 * input (`--args -` or `--args-file -`), as a real process against a real database: args far larger than
 * a command line can carry, and each bad input with its exit code and one line.
 */
import assert from "node:assert/strict";
import { testClient } from "../helpers/db.ts";
import { svcIn } from "../helpers/cli.ts";

Deno.test("svc job enqueue: --args-file PATH and - (standard input) take args of 1 MB; bad files are one line", async () => {
  const { client, schema, drop } = await testClient();
  const dir = await Deno.makeTempDir({ prefix: "svc-args-" });
  try {
    const blob = "é".repeat(500_000); // 1 MB of UTF-8: past what a command line takes (E2BIG)
    const file = `${dir}/args.json`;
    await Deno.writeTextFile(file, JSON.stringify({ blob, n: 1 }));
    const fromFile = await svcIn(schema, ["job", "enqueue", "big", "--args-file", file, "--json"]);
    assert.equal(fromFile.code, 0, fromFile.stderr);
    const a = JSON.parse(fromFile.stdout);
    assert.equal((await client.getJob(a.id))!.args.blob, blob);

    const piped = await svcIn(
      schema,
      ["job", "enqueue", "big", "--args", "-", "--json"],
      {},
      JSON.stringify({ n: 2, blob }),
    );
    assert.equal(piped.code, 0, piped.stderr);
    assert.deepEqual((await client.getJob(JSON.parse(piped.stdout).id))!.args, { n: 2, blob });

    const pipedFile = await svcIn(
      schema,
      ["job", "enqueue", "k", "--args-file", "-"],
      {},
      '{"to":"a@example.com"}',
    );
    assert.equal(pipedFile.code, 0, pipedFile.stderr);
    assert.match(pipedFile.stdout, /^enqueued job \d+ \(k on queue default/);

    const bad: [string[], string | undefined, number, RegExp][] = [
      [["--args-file", `${dir}/missing.json`], undefined, 1, /cannot read --args-file .*missing\.json/],
      [["--args-file", file, "--args", "{}"], undefined, 2, /--args and --args-file cannot be used together/],
      [["--args", "-"], "[1,2]", 2, /the args on standard input must be a JSON object/],
      [["--args", "-"], "{bad", 2, /the args on standard input is not valid JSON/],
      [["--args-file", "-"], "\u0000", 2, /the args on standard input/],
    ];
    await Deno.writeFile(`${dir}/latin1.json`, new Uint8Array([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d]));
    bad.push([["--args-file", `${dir}/latin1.json`], undefined, 2, /latin1\.json is not UTF-8 text/]);
    for (const [args, input, code, re] of bad) {
      const r = await svcIn(schema, ["job", "enqueue", "k", ...args], {}, input);
      assert.equal(r.code, code, `${args.join(" ")}: exit ${r.code}, ${r.stderr}`);
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0], /^error: /);
      assert.match(lines[0], re);
    }
    assert.equal((await client.listJobs()).jobs.length, 3, "only the three good enqueues wrote a job");
  } finally {
    await Deno.remove(dir, { recursive: true });
    await drop();
  }
});

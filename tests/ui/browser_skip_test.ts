/**
 * Without chromium on PATH the browser tests are skipped with one line, unless CI is set (as `.ci/run`
 * sets it): then they fail. Runs the browser test file in a child `deno test` with a PATH that has
 * no chromium.
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";

const FILE = new URL("./browser_test.ts", import.meta.url).pathname;
/** The tests' configuration (it maps playwright-core). */
const CONFIG = new URL("../../deno.contrib.json", import.meta.url).pathname;

async function runWithoutChromium(ci: string): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--config", CONFIG, FILE, "--filter", "read-only mode"],
    env: { PATH: dirname(Deno.execPath()), CI: ci, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test("browser tests without chromium: skipped with one line outside CI, a failure in CI", async () => {
  const [local, ci] = await Promise.all([runWithoutChromium(""), runWithoutChromium("1")]);
  assert.equal(local.code, 0, local.out);
  assert.match(local.out, /browser tests skipped: chromium not found \(apt-get install chromium\)/);
  assert.match(local.out, /ignored/);
  assert.notEqual(ci.code, 0, ci.out);
  assert.match(ci.out, /chromium not found/);
});

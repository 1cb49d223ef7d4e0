/**
 * Typed jobs at the type level: tests/types/typed_jobs.ts must type-check as it is, and without its
 * `@ts-expect-error` directives it must fail exactly on the lines after them (so each directive stands for
 * a real type error, in the place it names).
 */
import assert from "node:assert/strict";

const FIXTURE = new URL("./typed_jobs.ts", import.meta.url);
const MOD = new URL("../../mod.ts", import.meta.url).href;

/** `deno check` of one file: whether it passed, and the line of each error's primary location in `file`. */
async function check(
  file: string,
  args: string[] = [],
): Promise<{ ok: boolean; lines: number[]; out: string }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["check", ...args, file],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(r.stdout) + new TextDecoder().decode(r.stderr);
  const lines: number[] = [];
  // Each diagnostic starts with "TSnnnn [ERROR]:"; its first "at <file>:<line>:<col>" is where it is.
  for (const block of out.split(/TS\d+ \[ERROR\]:/).slice(1)) {
    const at = /\bat (\S+):(\d+):\d+/.exec(block);
    if (at && at[1].endsWith(file.split("/").pop()!)) lines.push(Number(at[2]));
  }
  return { ok: r.success, lines, out };
}

Deno.test("typed jobs: the type test module type-checks", async () => {
  const r = await check(FIXTURE.pathname);
  assert.ok(r.ok, r.out);
});

Deno.test("typed jobs: every @ts-expect-error line of the type test is a type error", async () => {
  const source = await Deno.readTextFile(FIXTURE);
  const expected: number[] = [];
  const stripped = source.split("\n").map((line, i) => {
    if (!/^\s*\/\/ @ts-expect-error/.test(line)) return line;
    expected.push(i + 2); // the line after the directive, 1-based
    return ""; // the same line numbers
  }).join("\n").replaceAll('"../../mod.ts"', JSON.stringify(MOD));
  assert.ok(expected.length >= 15, `the type test has its directives (${expected.length})`);
  const dir = await Deno.makeTempDir({ prefix: "svc-types-" });
  try {
    const file = `${dir}/typed_jobs_unexpected.ts`;
    await Deno.writeTextFile(file, stripped);
    const r = await check(file, ["--no-config", "--no-lock"]);
    assert.ok(!r.ok, "without its directives the module must fail");
    assert.deepEqual([...new Set(r.lines)].sort((a, b) => a - b), expected, r.out);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * The test command (`deno task test`): runs every test file under tests/ in parallel against the local
 * PostgreSQL and ends with the line `N passed, N failed` that CI reads.
 * Extra arguments are passed to `deno test` (e.g. a file or `--filter name`).
 */
const extra = Deno.args.length ? Deno.args : ["tests/"];
const cmd = new Deno.Command(Deno.execPath(), {
  args: ["test", "-A", "--parallel", ...extra],
  stdout: "piped",
  stderr: "inherit",
  env: { DENO_JOBS: Deno.env.get("DENO_JOBS") ?? "3", NO_COLOR: "1" },
});
const child = cmd.spawn();
// A watchdog: a hung test must fail CI long before its 90-minute limit, with the summary line printed.
const limitMs = Number(Deno.env.get("SVC_TEST_TIMEOUT_MS") ?? 30 * 60_000);
let timedOut = false;
const watchdog = setTimeout(() => {
  timedOut = true;
  console.error(`error: the test run exceeded ${limitMs / 60_000} minutes; stopping it`);
  try {
    child.kill("SIGKILL");
  } catch { /* already gone */ }
}, limitMs);
let tail = "";
const decoder = new TextDecoder();
for await (const chunk of child.stdout) {
  await Deno.stdout.write(chunk);
  tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4000);
}
const status = await child.status;
clearTimeout(watchdog);
const m = /(?:ok|FAILED)\s*\|\s*(\d+) passed(?: \((\d+) steps?\))?\s*\|\s*(\d+) failed/.exec(tail);
const passed = m ? Number(m[1]) : 0;
const failed = (m ? Number(m[3]) : (status.success ? 0 : 1)) + (timedOut ? 1 : 0);
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(timedOut ? 1 : status.code);

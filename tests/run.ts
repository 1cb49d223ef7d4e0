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
let tail = "";
const decoder = new TextDecoder();
for await (const chunk of child.stdout) {
  await Deno.stdout.write(chunk);
  tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4000);
}
const status = await child.status;
const m = /(?:ok|FAILED)\s*\|\s*(\d+) passed(?: \((\d+) steps?\))?\s*\|\s*(\d+) failed/.exec(tail);
const passed = m ? Number(m[1]) : 0;
const failed = m ? Number(m[3]) : (status.success ? 0 : 1);
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(status.code);

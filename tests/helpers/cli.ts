/** Runs the `svc` CLI as a real process (`deno run -A cli.ts ...`) and captures its output. */
import { DATABASE_URL } from "./db.ts";

/** What a CLI run produced. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Milliseconds from spawn to exit. */
  ms: number;
}

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

/**
 * Runs `svc <args>`. DATABASE_URL is the test database unless `env` says otherwise (an empty value
 * counts as unset, as in the CLI).
 */
export async function svc(
  args: string[],
  env: Record<string, string> = {},
  input?: Uint8Array | string,
): Promise<CliRun> {
  const t0 = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    env: { DATABASE_URL, NO_COLOR: "1", ...env },
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (input !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(typeof input === "string" ? new TextEncoder().encode(input) : input);
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return {
    code: out.code,
    stdout: dec.decode(out.stdout),
    stderr: dec.decode(out.stderr),
    ms: performance.now() - t0,
  };
}

/** `svc --schema <schema> <args>`. */
export function svcIn(
  schema: string,
  args: string[],
  env: Record<string, string> = {},
  input?: Uint8Array | string,
): Promise<CliRun> {
  return svc(["--schema", schema, ...args], env, input);
}

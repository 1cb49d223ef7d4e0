/** `svc serve` as a process of a test: started on port 0, its address read from its startup line. */
import { DATABASE_URL } from "./db.ts";
import { collectLines } from "./process.ts";

export const CLI = new URL("../../cli.ts", import.meta.url).pathname;
/** The test database, and none of the serve settings this process's environment might carry. */
export const SERVE_ENV = {
  DATABASE_URL,
  SERVICE_READ_ONLY: "",
  SERVICE_CALLBACK_HMAC_SECRET: "",
  SERVICE_POOL_MAX: "",
  SERVICE_AUTH_TOKEN: "",
  SERVICE_STATEMENT_TIMEOUT: "",
};

export interface ServeProc {
  child: Deno.ChildProcess;
  /** The startup line. */
  startup: string;
  out: string[];
  err: string[];
  url: string;
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

/** Starts `svc serve --port 0` in /tmp (not the repository) and waits for its startup line. */
export async function startServe(
  schema: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<ServeProc> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", "--port", "0", "--schema", schema, "--pool-max", "2", ...args],
    cwd: "/tmp",
    env: { ...SERVE_ENV, ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  const err: string[] = [];
  const done = Promise.all([collectLines(child.stdout, out), collectLines(child.stderr, err)]);
  const status = child.status;
  let exited = false;
  status.then(() => (exited = true));
  const until = Date.now() + 30_000;
  let url = "";
  let startup = "";
  while (!url) {
    startup = out.find((l) => l.startsWith("svc serve: open ")) ?? "";
    if (startup) url = /open (http:\/\/[^/]+)\//.exec(startup)![1];
    else if (exited || Date.now() > until) {
      await done;
      throw new Error(`svc serve did not start: ${JSON.stringify({ out, err })}`);
    } else await new Promise((r) => setTimeout(r, 25));
  }
  return {
    child,
    startup,
    out,
    err,
    url,
    async stop(signal: Deno.Signal = "SIGTERM") {
      if (!exited) child.kill(signal);
      const s = await status;
      await done;
      return s;
    },
  };
}

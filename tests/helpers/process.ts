/** Spawns fixture worker processes and reads their output lines. */
import { DATABASE_URL } from "./db.ts";

export interface Proc {
  child: Deno.ChildProcess;
  lines: string[];
  /** Resolves when a line matching `re` was printed. */
  waitLine(re: RegExp, timeoutMs?: number): Promise<string>;
  kill(signal?: Deno.Signal): Promise<void>;
  /** Resolves with the exit status. */
  status: Promise<Deno.CommandStatus>;
}

/** Appends each line of `stream` to `into` as it arrives (a last line without newline too); resolves at its end. */
export async function collectLines(stream: ReadableStream<Uint8Array>, into: string[]): Promise<void> {
  let buf = "";
  // Typed as a transform of bytes: checked together with the UI (DOM lib), TextDecoderStream takes BufferSource.
  for await (
    const chunk of stream.pipeThrough(new TextDecoderStream() as TransformStream<Uint8Array, string>)
  ) {
    buf += chunk;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    into.push(...parts);
  }
  if (buf) into.push(buf);
}

export function spawnWorker(schema: string, env: Record<string, string> = {}): Proc {
  return spawnFixture("worker_process.ts", schema, env);
}

/** Runs `tests/fixtures/<fixture>` with DATABASE_URL and SVC_SCHEMA set. */
export function spawnFixture(fixture: string, schema: string, env: Record<string, string> = {}): Proc {
  return spawnDeno(["run", "-A", new URL(`../fixtures/${fixture}`, import.meta.url).pathname], {
    env: { DATABASE_URL, SVC_SCHEMA: schema, ...env },
  });
}

/** Runs `deno <args>` (in `cwd`, with `env` on top of this process's) and reads its stdout lines. */
export function spawnDeno(args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Proc {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: opts.cwd,
    env: opts.env,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines: string[] = [];
  collectLines(child.stdout, lines);
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  return {
    child,
    lines,
    status,
    async waitLine(re, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const l = lines.find((x) => re.test(x));
        if (l) return l;
        if (Date.now() > until || exited) throw new Error(`no line ${re} (got ${JSON.stringify(lines)})`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async kill(signal: Deno.Signal = "SIGKILL") {
      if (!exited) {
        try {
          child.kill(signal);
        } catch { /* gone */ }
      }
      await status;
    },
  };
}

/**
 * The default loggers: console lines without debug, or JSON lines (`SERVICE_LOG_FORMAT=json`) with the
 * same events for log shippers: `{"time","level","msg"}` plus `error` (message and stack) when an event
 * carries one, info and debug on stdout, warnings and errors on stderr.
 */
import { describeValue, isErrorObject, safeGet } from "../describe.ts";
import type { Logger } from "../types.ts";
import { ValidationError } from "../errors.ts";

export const quietLogger: Logger = {
  debug: () => {},
  info: (...a: unknown[]) => console.info(...a),
  warn: (...a: unknown[]) => console.warn(...a),
  error: (...a: unknown[]) => console.error(...a),
};

/**
 * The logger of one job (`ctx.logger`): the worker's `child` logger with `job_id`, `kind` and `attempt`
 * when it has one (svc's JSON logger, pino), else the worker's logger with `job <id> (<kind>, attempt <n>):`
 * in front of each line.
 */
export function jobLogger(logger: Logger, job: { id: number; kind: string; attempt: number }): Logger {
  if (typeof logger.child === "function") {
    return logger.child({ job_id: job.id, kind: job.kind, attempt: job.attempt });
  }
  const prefix = `job ${job.id} (${job.kind}, attempt ${job.attempt}):`;
  return {
    debug: (...a: unknown[]) => logger.debug(prefix, ...a),
    info: (...a: unknown[]) => logger.info(prefix, ...a),
    warn: (...a: unknown[]) => logger.warn(prefix, ...a),
    error: (...a: unknown[]) => logger.error(prefix, ...a),
  };
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

type Level = "debug" | "info" | "warn" | "error";

/** One event as a JSON line; `fields` (a child logger's) go into the line beside `msg`. */
export function jsonLine(
  level: Level,
  args: unknown[],
  now: Date = new Date(),
  fields: Record<string, unknown> = {},
): string {
  const texts: string[] = [];
  let error: { message: string; name: string; stack?: string } | undefined;
  for (const a of args) {
    if (isErrorObject(a)) {
      const text = describeValue(a);
      const name = safeGet(a, "name");
      const stack = safeGet(a, "stack");
      error ??= {
        name: typeof name === "string" ? name : "Error",
        message: text,
        ...(typeof stack === "string" ? { stack } : {}),
      };
      texts.push(text);
    } else {
      texts.push(describeValue(a));
    }
  }
  const line: Record<string, unknown> = { time: now.toISOString(), level, msg: texts.join(" ") };
  for (const [k, v] of Object.entries(fields)) if (!(k in line)) line[k] = v;
  if (error) line.error = error;
  return JSON.stringify(line);
}

/** JSON lines; `debug` adds the debug events; `child(fields)` adds fields to every line. */
export function jsonLogger(
  opts: { debug?: boolean; out?: (line: string) => void; err?: (line: string) => void } = {},
  fields: Record<string, unknown> = {},
): Logger {
  const out = opts.out ?? ((l: string) => console.log(l));
  const err = opts.err ?? ((l: string) => console.error(l));
  return {
    debug: opts.debug ? (...a: unknown[]) => out(jsonLine("debug", a, undefined, fields)) : () => {},
    info: (...a: unknown[]) => out(jsonLine("info", a, undefined, fields)),
    warn: (...a: unknown[]) => err(jsonLine("warn", a, undefined, fields)),
    error: (...a: unknown[]) => err(jsonLine("error", a, undefined, fields)),
    child: (more) => jsonLogger(opts, { ...fields, ...more }),
  };
}

/** The logger `SERVICE_LOG_FORMAT` asks for: `text` (default) or `json`. */
export function defaultLogger(format: string | undefined): Logger {
  if (format === undefined || format === "" || format === "text") return quietLogger;
  if (format === "json") return jsonLogger();
  throw new ValidationError(`SERVICE_LOG_FORMAT must be text or json, got ${JSON.stringify(format)}`);
}

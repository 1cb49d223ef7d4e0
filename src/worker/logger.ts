/**
 * The default loggers: console lines without debug, or JSON lines (`SERVICE_LOG_FORMAT=json`) with the
 * same events for log shippers: `{"time","level","msg"}` plus `error` (message and stack) when an event
 * carries one, info and debug on stdout, warnings and errors on stderr.
 */
import type { Logger } from "../types.ts";
import { ValidationError } from "../errors.ts";

export const quietLogger: Logger = {
  debug: () => {},
  info: (...a: unknown[]) => console.info(...a),
  warn: (...a: unknown[]) => console.warn(...a),
  error: (...a: unknown[]) => console.error(...a),
};

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

type Level = "debug" | "info" | "warn" | "error";

/** One event as a JSON line. */
export function jsonLine(level: Level, args: unknown[], now = new Date()): string {
  const texts: string[] = [];
  let error: { message: string; name: string; stack?: string } | undefined;
  for (const a of args) {
    if (a instanceof Error) {
      error ??= { name: a.name, message: a.message, stack: a.stack };
      texts.push(a.message);
    } else if (typeof a === "string") {
      texts.push(a);
    } else {
      try {
        texts.push(JSON.stringify(a) ?? String(a));
      } catch {
        texts.push(String(a));
      }
    }
  }
  const line: Record<string, unknown> = { time: now.toISOString(), level, msg: texts.join(" ") };
  if (error) line.error = error;
  return JSON.stringify(line);
}

/** JSON lines; `debug` adds the debug events. */
export function jsonLogger(
  opts: { debug?: boolean; out?: (line: string) => void; err?: (line: string) => void } = {},
): Logger {
  const out = opts.out ?? ((l: string) => console.log(l));
  const err = opts.err ?? ((l: string) => console.error(l));
  return {
    debug: opts.debug ? (...a: unknown[]) => out(jsonLine("debug", a)) : () => {},
    info: (...a: unknown[]) => out(jsonLine("info", a)),
    warn: (...a: unknown[]) => err(jsonLine("warn", a)),
    error: (...a: unknown[]) => err(jsonLine("error", a)),
  };
}

/** The logger `SERVICE_LOG_FORMAT` asks for: `text` (default) or `json`. */
export function defaultLogger(format: string | undefined): Logger {
  if (format === undefined || format === "" || format === "text") return quietLogger;
  if (format === "json") return jsonLogger();
  throw new ValidationError(`SERVICE_LOG_FORMAT must be text or json, got ${JSON.stringify(format)}`);
}

/** The default logger: console without debug lines. */
import type { Logger } from "../types.ts";

export const quietLogger: Logger = {
  debug: () => {},
  info: (...a: unknown[]) => console.info(...a),
  warn: (...a: unknown[]) => console.warn(...a),
  error: (...a: unknown[]) => console.error(...a),
};

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

/**
 * What PostgreSQL can store and what survives the trip through a JavaScript double: one set of input
 * rules for the library (a `ValidationError`), the callback receiver (400 `invalid_body`), the admin
 * API (400 `invalid_request`) and the CLI (exit 2).
 *
 * Refused everywhere: strings (object keys included) holding U+0000 or a lone UTF-16 surrogate (jsonb
 * and text columns reject both), JSON nested deeper than {@link MAX_JSON_DEPTH}, impossible dates and
 * years outside 1..9999. Refused where JSON text arrives from outside (HTTP bodies, `--args`): numbers
 * whose value changes when read as a double (`9007199254740993`, `1e400`), since handlers in
 * JavaScript would see another number than the one sent.
 */
import { ValidationError } from "./errors.ts";
import { describeThrown, safeInstanceOf } from "./describe.ts";

/** Deepest nesting of arrays and objects accepted in a JSON value. */
export const MAX_JSON_DEPTH = 512;

const hex4 = (n: number) => n.toString(16).padStart(4, "0");

/** Why `s` cannot be stored as PostgreSQL text or inside jsonb (NUL, a lone surrogate), or null. */
export function textProblem(s: string): string | null {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0) return "contains U+0000 (NUL), which PostgreSQL cannot store";
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = s.charCodeAt(i + 1);
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return `contains a lone surrogate (\\u${hex4(c)}), which is not Unicode text`;
    }
  }
  return null;
}

/** The bytes as UTF-8 text, or null when they are not valid UTF-8 (never U+FFFD in their place). */
export function utf8Text(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/**
 * `s` as text PostgreSQL can always store: NUL and lone surrogates replaced by U+FFFD, and cut to `max`
 * UTF-16 units with a note of how much was left out. For text svc writes on its own behalf (a handler's
 * error message), where refusing is not an option.
 */
export function storableText(s: string, max = 65_536): string {
  let out = s.length > max ? s.slice(0, max) : s;
  if (textProblem(out)) {
    // deno-lint-ignore no-control-regex
    out = out.replace(/\u0000/g, "\ufffd").replace(
      /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      "\ufffd",
    );
  }
  return s.length > max ? `${out}… (${s.length - max} more characters)` : out;
}

/** Returns `s`, or throws a ValidationError naming `what` when it cannot be stored. */
export function checkText(what: string, s: string): string {
  const p = textProblem(s);
  if (p) throw new ValidationError(`${what} ${p}`);
  return s;
}

/**
 * Why well-formed JSON text cannot be stored or would change on the way in, or null: a string or key
 * with NUL or a lone surrogate (escaped or raw), nesting deeper than {@link MAX_JSON_DEPTH}, and, with
 * `exactNumbers`, a number that is not exactly what a double reads back. The text must already have
 * passed `JSON.parse` (or come from `JSON.stringify`). `maxDepth` (default {@link MAX_JSON_DEPTH}) is
 * one more for a request body whose fields hold the values (its own object is one level).
 */
export function jsonTextProblem(
  text: string,
  opts: { exactNumbers?: boolean; maxDepth?: number } = {},
): string | null {
  const maxDepth = opts.maxDepth ?? MAX_JSON_DEPTH;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: decode its code units, checking NUL and surrogate pairs as they come.
      let high = -1; // a high surrogate waiting for its low half
      for (i++; i < n; i++) {
        let u = text.charCodeAt(i);
        if (u === 0x22) break;
        if (u === 0x5c) {
          i++;
          const e = text.charCodeAt(i);
          if (e === 0x75) {
            u = parseInt(text.slice(i + 1, i + 5), 16);
            i += 4;
          } else u = e;
        }
        if (high >= 0) {
          if (u >= 0xdc00 && u <= 0xdfff) {
            high = -1;
            continue;
          }
          return `a string contains a lone surrogate (\\u${hex4(high)}), which is not Unicode text`;
        }
        if (u === 0) return "a string contains U+0000 (NUL), which PostgreSQL cannot store";
        if (u >= 0xd800 && u <= 0xdbff) high = u;
        else if (u >= 0xdc00 && u <= 0xdfff) {
          return `a string contains a lone surrogate (\\u${hex4(u)}), which is not Unicode text`;
        }
      }
      if (high >= 0) {
        return `a string contains a lone surrogate (\\u${hex4(high)}), which is not Unicode text`;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return `JSON is nested deeper than ${MAX_JSON_DEPTH} levels`;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    } else if (opts.exactNumbers && (c === 0x2d || (c >= 0x30 && c <= 0x39))) {
      let j = i + 1;
      while (j < n && /[0-9.eE+-]/.test(text[j])) j++;
      const token = text.slice(i, j);
      if (!exactDouble(token)) {
        const v = Number(token);
        return `the number ${token.length > 40 ? token.slice(0, 40) + "…" : token} ${
          Number.isFinite(v) ? `would be read as ${v}` : "is out of the range of a double"
        }; send numbers that a 64-bit double holds exactly (or send it as a string)`;
      }
      i = j - 1;
    }
  }
  return null;
}

/** A decimal as sign, significant digits (no leading or trailing zeros) and the exponent of 0.digits. */
function decimal(s: string): { neg: boolean; digits: string; exp: number } | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s);
  if (!m) return null;
  const all = m[2] + (m[3] ?? "");
  let exp = Number(m[4] ?? 0) + m[2].length;
  let start = 0;
  while (start < all.length && all[start] === "0") start++;
  exp -= start;
  const digits = all.slice(start).replace(/0+$/, "");
  return digits === "" ? { neg: false, digits: "", exp: 0 } : { neg: m[1] === "-", digits, exp };
}

/** Whether the JSON number `token` reads as a double of exactly the value written (`0.1` and `1.0` do). */
export function exactDouble(token: string): boolean {
  const v = Number(token);
  if (!Number.isFinite(v)) return false;
  const a = decimal(token);
  const b = decimal(String(v));
  return a !== null && b !== null && a.neg === b.neg && a.digits === b.digits && a.exp === b.exp;
}

/** Why JSON text from outside cannot be taken (syntax, or {@link jsonTextProblem} with exact numbers). */
export type JsonInput = { ok: true; value: unknown } | { ok: false; syntax: boolean; problem: string };

/**
 * Parses JSON text that arrived from outside (an HTTP body, a CLI argument) under the rules above.
 * `envelope`: the text is an object whose fields hold the values (a request body), so it may be one
 * level deeper than a value.
 */
export function parseJsonInput(text: string, opts: { envelope?: boolean } = {}): JsonInput {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, syntax: true, problem: `not valid JSON (${(e as Error).message})` };
  }
  const maxDepth = MAX_JSON_DEPTH + (opts.envelope ? 1 : 0);
  const problem = jsonTextProblem(text, { exactNumbers: true, maxDepth });
  return problem ? { ok: false, syntax: false, problem } : { ok: true, value };
}

/**
 * Serializes a value of the library's caller as JSON and checks that PostgreSQL can store it; returns
 * the text. Throws a ValidationError naming `what` (e.g. `args of send_email`). A number JSON has no form
 * for (`NaN`, `Infinity`, `-Infinity`, which `JSON.stringify` writes as `null`) is refused instead of
 * stored changed; with `exactNumbers` (a handler's result, read back as the value returned) `-0`, which
 * JSON writes as `0`, is refused too.
 */
export function checkJsonValue(what: string, v: unknown, opts: { exactNumbers?: boolean } = {}): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    const deep = safeInstanceOf(e, RangeError) && /call stack/i.test(describeThrown(e));
    throw new ValidationError(
      deep
        ? `${what}: JSON is nested deeper than ${MAX_JSON_DEPTH} levels`
        : `${what} must be JSON-serializable: ${describeThrown(e)}`,
    );
  }
  if (text === undefined) return "null";
  const p = jsonTextProblem(text);
  if (p) throw new ValidationError(`${what}: ${p}`);
  // Only a text with a null (or, for exact numbers, any value) can hide a number JSON changed: the second,
  // slower pass that finds it runs only then.
  if (opts.exactNumbers || text.includes("null")) {
    const inexact = inexactNumber(v, opts.exactNumbers === true);
    if (inexact !== undefined) {
      const negZero = Object.is(inexact, -0);
      throw new ValidationError(
        `${what}: the number ${negZero ? "-0" : String(inexact)} has no JSON form ` +
          `(JSON would store it as ${negZero ? "0" : "null"}); use null or a string instead`,
      );
    }
  }
  return text;
}

/** The first number of `v` (as JSON.stringify visits it) that JSON would change, or undefined. */
function inexactNumber(v: unknown, negativeZero: boolean): number | undefined {
  let found: number | undefined;
  JSON.stringify(v, (_k: string, x: unknown) => {
    if (
      typeof x === "number" && found === undefined &&
      (!Number.isFinite(x) || (negativeZero && Object.is(x, -0)))
    ) {
      found = x;
    }
    return x;
  });
  return found;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * An RFC 3339 date-time with a zone (`2026-12-01T09:00:00Z`, `2026-12-01 10:00:00.5+01:00`), or null:
 * the date must exist (`2026-02-31` does not), the year is 0001 to 9999, hours 00-23, minutes and
 * seconds 00-59 (a leap second is refused), the offset at most ±23:59. Fractions finer than a
 * millisecond are truncated.
 */
export function parseRfc3339(s: string): Date | null {
  const m = RFC3339.exec(s);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offset = 0;
  if (m[8]) {
    const oh = Number(m[9]);
    const om = Number(m[10]);
    if (oh > 23 || om > 59) return null;
    offset = (m[8] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const ms = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, ms);
  return new Date(d.getTime() - offset * 60_000);
}

/** Throws a ValidationError unless `d` is a valid Date in the years 1 to 9999. */
export function checkDate(what: string, d: unknown): Date {
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) {
    throw new ValidationError(`${what} must be a valid Date`);
  }
  const y = d.getUTCFullYear();
  if (y < 1 || y > 9999) {
    throw new ValidationError(`${what} must be in the years 1 to 9999, got ${y}`);
  }
  return d;
}

/** The job id in a `next_cursor` (`base64("id:<n>")`), or null when it is not one a page could give. */
export function parseJobCursor(c: string): number | null {
  let text: string;
  try {
    text = atob(c);
  } catch {
    return null;
  }
  const m = /^id:(\d{1,16})$/.exec(text);
  if (!m) return null;
  const id = Number(m[1]);
  return Number.isSafeInteger(id) && id >= 1 ? id : null;
}

/** Throws a ValidationError unless `c` is a cursor a page of `listJobs` could have given. */
export function checkJobCursor(c: unknown): string {
  if (typeof c !== "string" || parseJobCursor(c) === null) {
    throw new ValidationError(
      "invalid cursor: pass the next_cursor of a previous page, or omit it for the first page",
    );
  }
  return c;
}

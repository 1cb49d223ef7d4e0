/**
 * A readable text for any thrown value. A handler can throw (or reject with) anything JavaScript has:
 * `undefined`, a Symbol, a function, an object without a prototype, an object whose `toString`, `toJSON`
 * or getters throw, a Proxy whose traps throw, a cyclic object, an `Error` whose `message` is not a
 * string. svc stores the attempt's error as text, logs it and puts it on the attempt's span: none of
 * that may throw, or the worker would lose track of the attempt (or of the whole process).
 *
 * The rule (docs/guide/handlers.md, "Errors"): an `Error` is its `message` (its `name` when the message
 * is empty; a `message` that is not a string is described by the rules below); a string is itself; a
 * number, boolean, bigint or Symbol is what `String()` gives; `undefined` and `null` are named; a
 * function is named by its name; any other object is its JSON, or else its `String()`, or else its
 * class and keys. The text is not yet cut to a storable length: `storableText` does that.
 */

/** Runs `f`, or returns `fallback` when it throws (whatever it throws). */
function attempt<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}

/** `v instanceof Error`, false when asking throws (a Proxy's getPrototypeOf trap). */
export function isErrorObject(v: unknown): v is Error {
  return attempt(() => v instanceof Error, false);
}

/** `v instanceof C`, false when asking throws. */
export function safeInstanceOf(v: unknown, C: abstract new (...a: never[]) => unknown): boolean {
  return attempt(() => v instanceof C, false);
}

/** `v[key]`, undefined when reading it throws. */
export function safeGet(v: unknown, key: string): unknown {
  if (v === null || (typeof v !== "object" && typeof v !== "function")) return undefined;
  return attempt(() => (v as Record<string, unknown>)[key], undefined);
}

function className(v: object): string | null {
  const proto = attempt(() => Object.getPrototypeOf(v), null);
  if (proto === null) return null;
  const ctor = attempt(() => (proto as { constructor?: { name?: unknown } }).constructor?.name, undefined);
  return typeof ctor === "string" && ctor !== "" ? ctor : null;
}

function describeObject(v: object): string {
  const json = attempt(() => JSON.stringify(v) as string | undefined, undefined);
  if (typeof json === "string" && json !== "{}") return json;
  const text = attempt(() => String(v), "");
  if (text !== "" && !/^\[object \w*\]$/.test(text)) return text;
  const keys = attempt(() => Reflect.ownKeys(v).filter((k) => typeof k === "string") as string[], []);
  const cls = className(v);
  const what = cls === null ? "an object without a prototype" : `an object of class ${cls}`;
  if (keys.length === 0) return json === "{}" && cls === "Object" ? "{}" : what;
  const shown = keys.slice(0, 20).join(", ") + (keys.length > 20 ? `, … (${keys.length - 20} more)` : "");
  return `${what} (keys: ${shown})`;
}

/** A readable text for any value (a log line's argument); never throws. */
export function describeValue(v: unknown, depth = 0): string {
  try {
    switch (typeof v) {
      case "undefined":
        return "undefined";
      case "string":
        return v;
      case "number":
      case "boolean":
        return String(v);
      case "bigint":
        return `${String(v)}n`;
      case "symbol":
        return attempt(() => v.toString(), "a Symbol");
      case "function": {
        const name = attempt(() => v.name, "");
        return `a function (${typeof name === "string" && name !== "" ? name : "anonymous"})`;
      }
    }
    if (v === null) return "null";
    if (isErrorObject(v)) {
      const message = safeGet(v, "message");
      if (typeof message === "string" && message !== "") return message;
      if (message !== undefined && message !== "" && depth < 2) return describeValue(message, depth + 1);
      const name = safeGet(v, "name");
      return typeof name === "string" && name !== "" ? name : "Error";
    }
    return describeObject(v as object);
  } catch {
    return "a value that cannot be described";
  }
}

/** A readable, non-empty text for any value a handler threw; never throws. */
export function describeThrown(e: unknown): string {
  if (e === undefined) return "undefined was thrown (a rejection without a reason)";
  if (e === null) return "null was thrown";
  if (e === "") return "an empty string was thrown";
  if (typeof e === "function") return `${describeValue(e)} was thrown`;
  const text = describeValue(e);
  return text === "" ? "an error without a message was thrown" : text;
}

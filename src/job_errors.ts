/**
 * The stack of an attempt's error, and how it travels. A failure carries its error's message and, apart,
 * its stack: a handler's `Error.stack`, an HTTP function's status and the first bytes of its answer.
 * Both storage engines keep an attempt's error as one text (`errors[].error`), so the stack is stored in
 * that text after a record separator (U+001E) and split off again wherever a job is read: `errors[]`
 * then has `error` (the message) and `stack`. A rescued attempt has no error of its own; its `stack`
 * says what the leader saw.
 */
import type { JobError } from "./types.ts";

/** Most UTF-8 bytes of an attempt's stack that are kept (the rest is cut, with a note). */
export const MAX_STACK_BYTES = 8192;

const SEP = "\u001e";

/** `stack` cut to `MAX_STACK_BYTES` of UTF-8 at a character boundary, with a note of what was left out. */
export function capStack(stack: string): string {
  const bytes = new TextEncoder().encode(stack);
  if (bytes.length <= MAX_STACK_BYTES) return stack;
  let end = MAX_STACK_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // not inside a character
  const kept = new TextDecoder().decode(bytes.subarray(0, end));
  return `${kept}\n… (${bytes.length - end} more bytes)`;
}

/** The text an engine stores for a failed attempt: the message, then the capped stack when there is one. */
export function storedErrorText(error: string, stack?: string): string {
  const msg = error.replaceAll(SEP, " ");
  return stack ? `${msg}${SEP}${capStack(stack.replaceAll(SEP, " "))}` : msg;
}

/** An attempt's error as read from storage: message and stack apart. */
export function readJobError(e: JobError): JobError {
  if (typeof e?.error !== "string") return e;
  const at = e.error.indexOf(SEP);
  if (at >= 0) return { ...e, error: e.error.slice(0, at), stack: e.error.slice(at + 1) };
  if (e.stack === undefined && e.error.startsWith("rescued: ")) {
    return {
      ...e,
      stack: `the leader rescued this attempt (${e.error.slice(9)}): the process running it stopped ` +
        "heartbeating or overran its deadline, so no error of the handler was recorded; its own log may say more",
    };
  }
  return e;
}

/** Every error of a job as read from storage (`readJobError`). */
export function readJobErrors(list: unknown): JobError[] {
  return Array.isArray(list) ? (list as JobError[]).map(readJobError) : [];
}

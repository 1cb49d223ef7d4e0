/**
 * Request bodies as the admin API and the callback receiver take them: bytes counted as they arrive
 * (Content-Length alone is not trusted) up to a limit, then decoded as UTF-8 that must be valid.
 */
import { HttpError } from "./errors.ts";

/** 413 `payload_too_large` naming the limit. */
export function tooLarge(max: number): HttpError {
  return new HttpError(
    "payload_too_large",
    `request body is larger than ${max} bytes (${max / 1024 / 1024} MiB)`,
  );
}

/** Reads at most `max` bytes of the body; throws 413 `payload_too_large` beyond. */
export async function readBoundedBody(req: Request, max: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > max) throw tooLarge(max);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge(max);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

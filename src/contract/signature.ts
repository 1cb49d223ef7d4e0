/**
 * Callback signatures (docs/reference/protocol.md, "Signatures"): the lowercase hex BLAKE3 keyed hash
 * of the callback id (UTF-8), keyed with a 32-byte secret. It is not computed over the request body and
 * is not RFC HMAC, despite the option name `hmac_secret`. Test vectors:
 * `tests/fixtures/vectors/callback_signatures.json` (the Python client is checked against the same file).
 *
 * @module
 */

import { blake3 } from "npm:@noble/hashes@2.4.0/blake3.js";
import { bytesToHex, hexToBytes, utf8ToBytes } from "npm:@noble/hashes@2.4.0/utils.js";
import { ValidationError } from "../errors.ts";

/** Request header that carries the callback signature. */
export const SIGNATURE_HEADER: string = "X-Service-Signature";

const SECRET_BYTES = 32;
const HEX64_RE = /^[0-9a-fA-F]{64}$/;

/**
 * Parses the shared secret from exactly 64 hex characters (either case) into its 32 bytes.
 * Throws an error that says how to make a valid secret; the message never contains the input.
 */
export function parseSecret(hex: string): Uint8Array {
  if (typeof hex !== "string" || !HEX64_RE.test(hex)) {
    const problem = typeof hex !== "string"
      ? "is not a string"
      : hex.length !== 64
      ? `has ${hex.length} characters`
      : "contains a character that is not hex";
    throw new ValidationError(
      `callback HMAC secret must be exactly 64 hex characters (32 bytes) but ${problem}; ` +
        "generate one with: openssl rand -hex 32",
    );
  }
  return hexToBytes(hex.toLowerCase());
}

function assertSecret(secret: Uint8Array): void {
  if (!(secret instanceof Uint8Array) || secret.length !== SECRET_BYTES) {
    throw new ValidationError(
      "callback HMAC secret must be 32 bytes; parse the 64-hex-character setting with parseSecret()",
    );
  }
}

function digest(secret: Uint8Array, callbackId: string): Uint8Array {
  assertSecret(secret);
  return blake3(utf8ToBytes(callbackId), { key: secret });
}

/** Signature of `callbackId` under `secret`: 64 lowercase hex characters. Throws if `secret` is not 32 bytes. */
export function sign(secret: Uint8Array, callbackId: string): string {
  return bytesToHex(digest(secret, callbackId));
}

/**
 * True when `signature` is the signature of `callbackId` under `secret`. Anything but exactly
 * 64 hex characters (missing, empty, too short or long, non-hex) is invalid; hex is compared
 * case-insensitively and in constant time. Throws if `secret` is not 32 bytes (a configuration
 * error, not a bad request).
 */
export function verify(
  secret: Uint8Array,
  callbackId: string,
  signature: string | null | undefined,
): boolean {
  const expected = digest(secret, callbackId);
  if (typeof signature !== "string" || !HEX64_RE.test(signature)) return false;
  const provided = hexToBytes(signature.toLowerCase());
  // Compare every byte, no early exit: the time taken does not depend on where they differ.
  let diff = 0;
  for (let i = 0; i < expected.length; i++) diff |= expected[i] ^ provided[i];
  return diff === 0;
}

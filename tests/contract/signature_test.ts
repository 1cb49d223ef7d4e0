import assert from "node:assert/strict";
import { parseSecret, sign, SIGNATURE_HEADER, verify } from "../../src/contract/mod.ts";
import { readVectors } from "../helpers/vectors.ts";

interface SignatureCase {
  secret_hex: string;
  callback_id: string;
  signature: string;
}

const vectors: { about: string; cases: SignatureCase[] } = await readVectors("callback_signatures.json");

const KEY = parseSecret("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
const ID = "b2221a58-008a-45a6-8464-7159c324c985";

Deno.test("vectors file has cases", () => {
  assert.ok(vectors.cases.length >= 14, `only ${vectors.cases.length} cases`);
});

for (const [i, c] of vectors.cases.entries()) {
  Deno.test(`vector ${i}: sign matches b3sum --keyed (${JSON.stringify(c.callback_id)})`, () => {
    assert.equal(sign(parseSecret(c.secret_hex), c.callback_id), c.signature);
  });
  Deno.test(`vector ${i}: verify accepts the signature, lowercase and uppercase`, () => {
    const secret = parseSecret(c.secret_hex);
    assert.equal(verify(secret, c.callback_id, c.signature), true);
    assert.equal(verify(secret, c.callback_id, c.signature.toUpperCase()), true);
  });
}

Deno.test("header name", () => {
  assert.equal(SIGNATURE_HEADER, "X-Service-Signature");
});

Deno.test("sign emits 64 lowercase hex characters", () => {
  assert.match(sign(KEY, ID), /^[0-9a-f]{64}$/);
});

Deno.test("verify accepts mixed case", () => {
  const sig = sign(KEY, ID);
  const mixed = [...sig].map((ch, i) => (i % 2 ? ch.toUpperCase() : ch)).join("");
  assert.equal(verify(KEY, ID, mixed), true);
});

Deno.test("verify rejects a wrong signature", () => {
  const sig = sign(KEY, ID);
  const flippedLast = sig.slice(0, 63) + (sig[63] === "0" ? "1" : "0");
  const flippedFirst = (sig[0] === "0" ? "1" : "0") + sig.slice(1);
  assert.equal(verify(KEY, ID, flippedLast), false);
  assert.equal(verify(KEY, ID, flippedFirst), false);
  assert.equal(verify(KEY, ID, "0".repeat(64)), false);
});

Deno.test("verify rejects a signature made with another secret", () => {
  const other = parseSecret("f".repeat(64));
  assert.equal(verify(KEY, ID, sign(other, ID)), false);
});

Deno.test("verify rejects a tampered callback id", () => {
  const sig = sign(KEY, ID);
  assert.equal(verify(KEY, "b2221a58-008a-45a6-8464-7159c324c986", sig), false);
  assert.equal(verify(KEY, ID.toUpperCase(), sig), false);
  assert.equal(verify(KEY, ID + " ", sig), false);
  assert.equal(verify(KEY, "", sig), false);
});

Deno.test("verify rejects malformed values: 63 and 65 chars, non-hex, empty, null, undefined", () => {
  const sig = sign(KEY, ID);
  assert.equal(verify(KEY, ID, sig.slice(0, 63)), false);
  assert.equal(verify(KEY, ID, sig + "0"), false);
  assert.equal(verify(KEY, ID, sig.slice(0, 63) + "g"), false);
  assert.equal(verify(KEY, ID, "z".repeat(64)), false);
  assert.equal(verify(KEY, ID, ` ${sig.slice(1)}`), false);
  assert.equal(verify(KEY, ID, `${sig}\n`), false);
  assert.equal(verify(KEY, ID, `0x${sig.slice(2)}`), false);
  assert.equal(verify(KEY, ID, ""), false);
  assert.equal(verify(KEY, ID, null), false);
  assert.equal(verify(KEY, ID, undefined), false);
});

Deno.test("parseSecret accepts 64 hex characters in either case", () => {
  const lower = parseSecret("ab".repeat(32));
  const upper = parseSecret("AB".repeat(32));
  assert.equal(lower.length, 32);
  assert.deepEqual(lower, upper);
  assert.ok(lower.every((b) => b === 0xab));
});

Deno.test("parseSecret rejects bad input with a message naming the fix and not the secret", () => {
  const bad = [
    "",
    "ab".repeat(31) + "a", // 63
    "ab".repeat(32) + "a", // 65
    "ab".repeat(16), // 32 chars: a 32-character string is not 32 bytes
    "zz" + "ab".repeat(31), // non-hex
    " " + "ab".repeat(31) + "a", // whitespace
    "ab".repeat(32) + "\n",
  ];
  for (const input of bad) {
    assert.throws(
      () => parseSecret(input),
      (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /exactly 64 hex characters \(32 bytes\)/);
        assert.match(err.message, /openssl rand -hex 32/);
        if (input.trim().length >= 8) {
          assert.ok(!err.message.includes(input.trim()), "message leaks the secret");
        }
        return true;
      },
      `accepted ${JSON.stringify(input)}`,
    );
  }
});

Deno.test("sign and verify reject a secret that is not 32 bytes", () => {
  for (const secret of [new Uint8Array(0), new Uint8Array(31), new Uint8Array(33), new Uint8Array(64)]) {
    assert.throws(() => sign(secret, ID), /must be 32 bytes/);
    assert.throws(() => verify(secret, ID, "0".repeat(64)), /must be 32 bytes/);
  }
});

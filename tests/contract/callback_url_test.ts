import assert from "node:assert/strict";
import { readVectors } from "../helpers/vectors.ts";
import {
  CALLBACK_ACTIONS,
  type CallbackAction,
  callbackUrl,
  DEFAULT_CALLBACK_PATH_PREFIX,
  isUuid,
  normalizePathPrefix,
} from "../../src/contract/mod.ts";

interface UrlCase {
  base_url: string;
  path_prefix: string;
  callback_id: string;
  action: CallbackAction;
  url: string;
}

const vectors: { about: string; cases: UrlCase[] } = await readVectors("callback_urls.json");

const ID = "550e8400-e29b-41d4-a716-446655440000";

Deno.test("vectors file has cases", () => {
  assert.ok(vectors.cases.length >= 9, `only ${vectors.cases.length} cases`);
});

for (const [i, c] of vectors.cases.entries()) {
  Deno.test(`vector ${i}: ${JSON.stringify(c.base_url)} + ${JSON.stringify(c.path_prefix)} (${c.action})`, () => {
    assert.equal(callbackUrl(c.base_url, c.path_prefix, c.callback_id, c.action), c.url);
  });
}

Deno.test("default prefix and default action", () => {
  assert.equal(DEFAULT_CALLBACK_PATH_PREFIX, "/api/callbacks");
  assert.equal(
    callbackUrl("https://cb.example.com", undefined, ID),
    `https://cb.example.com/api/callbacks/${ID}/complete`,
  );
  assert.equal(
    callbackUrl("https://cb.example.com/", undefined, ID, "heartbeat"),
    `https://cb.example.com/api/callbacks/${ID}/heartbeat`,
  );
});

Deno.test("an empty prefix is not the default prefix", () => {
  assert.equal(callbackUrl("https://cb.example.com", "", ID), `https://cb.example.com/${ID}/complete`);
});

Deno.test("every action", () => {
  assert.deepEqual([...CALLBACK_ACTIONS], ["complete", "fail", "heartbeat"]);
  for (const action of CALLBACK_ACTIONS) {
    assert.equal(callbackUrl("http://h", "/cb", ID, action), `http://h/cb/${ID}/${action}`);
  }
});

Deno.test("an unknown action is refused", () => {
  assert.throws(
    () => callbackUrl("http://h", "/cb", ID, "retry" as CallbackAction),
    /unknown callback action "retry"/,
  );
});

Deno.test("a callback id is one path segment", () => {
  assert.equal(callbackUrl("http://h", "/cb", "a/b?c", "fail"), "http://h/cb/a%2Fb%3Fc/fail");
});

Deno.test("normalizePathPrefix", () => {
  const cases: [string, string][] = [
    ["/api/callbacks", "/api/callbacks"],
    ["/api/callbacks/", "/api/callbacks"],
    ["api/callbacks", "/api/callbacks"],
    ["", ""],
    ["/", ""],
    ["///", ""],
    ["   ", ""],
    [" / ", ""],
    ["hooks//", "/hooks"],
    ["  /cb/  ", "/cb"],
    ["/a/b/c", "/a/b/c"],
  ];
  for (const [input, want] of cases) assert.equal(normalizePathPrefix(input), want, JSON.stringify(input));
});

Deno.test("isUuid accepts the canonical form in any case", () => {
  assert.equal(isUuid(ID), true);
  assert.equal(isUuid(ID.toUpperCase()), true);
  assert.equal(isUuid("00000000-0000-0000-0000-000000000000"), true);
  assert.equal(isUuid("B2221A58-008a-45A6-8464-7159c324c985"), true);
});

Deno.test("isUuid rejects everything else", () => {
  for (
    const s of [
      "",
      "not-a-uuid",
      ID.replaceAll("-", ""),
      `{${ID}}`,
      `urn:uuid:${ID}`,
      ` ${ID}`,
      `${ID}\n`,
      ID.slice(0, 35),
      `${ID}0`,
      ID.replace("5", "g"),
      "550e8400e-29b-41d4-a716-446655440000",
    ]
  ) {
    assert.equal(isUuid(s), false, JSON.stringify(s));
  }
});

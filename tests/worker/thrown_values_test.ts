/**
 * Whatever a handler throws (or rejects with), its attempt ends with a stored, readable error, the
 * worker process goes on and the jobs beside it complete (docs/guide/handlers.md, "Errors"): every
 * JavaScript type, objects without a prototype, throwing getters, `toString`, `toJSON` and Proxy traps,
 * cyclic and deeply nested objects, huge strings, Symbols, functions, `undefined`, and random values
 * of every shape fast-check makes. Tracing is on (the default): the attempt's span takes the error too.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { TerminalError } from "../../mod.ts";
import { countJobs, testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { describeThrown, describeValue } from "../../src/describe.ts";
import { jsonLine } from "../../src/worker/logger.ts";

const throwing = (what: string) => () => {
  throw new Error(`${what} throws`);
};

function nested(n: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = { v };
  return v;
}

/** Hostile thrown values, each with what its stored error must show. */
function catalogue(): [string, () => unknown, RegExp][] {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const trapAll = () => {
    throw new Error("trap");
  };
  return [
    ["undefined", () => undefined, /^undefined was thrown/],
    ["null", () => null, /^null was thrown$/],
    ["empty string", () => "", /^an empty string was thrown$/],
    ["string", () => "plain words", /^plain words$/],
    ["huge string", () => "x".repeat(5_000_000), /^x{65536}… \(4934464 more characters\)$/],
    ["NUL string", () => "a\u0000b\ud800", /^a\ufffdb\ufffd$/],
    ["number", () => 42, /^42$/],
    ["NaN", () => NaN, /^NaN$/],
    ["bigint", () => 12n, /^12n$/],
    ["boolean", () => false, /^false$/],
    ["Symbol", () => Symbol("boom"), /^Symbol\(boom\)$/],
    ["named function", () => function namedFn() {}, /^a function \(namedFn\) was thrown$/],
    ["arrow function", () => () => {}, /^a function \((anonymous|)\w*\) was thrown$/],
    [
      "null prototype",
      () => Object.assign(Object.create(null), { code: "E_QUOTA" }),
      /^\{"code":"E_QUOTA"\}$/,
    ],
    ["empty null prototype", () => Object.create(null), /^an object without a prototype$/],
    ["throwing toString", () => ({ toString: throwing("toString") }), /keys: toString/],
    [
      "throwing toJSON and toString",
      () => ({ toJSON: throwing("toJSON"), toString: throwing("toString"), code: 7 }),
      /an object of class Object \(keys: toJSON, toString, code\)/,
    ],
    [
      "throwing Symbol.toPrimitive",
      () => ({ [Symbol.toPrimitive]: throwing("toPrimitive"), toJSON: throwing("toJSON") }),
      /^an object of class Object \(keys: toJSON\)$/,
    ],
    ["throwing getter", () => ({
      get x() {
        return throwing("x")();
      },
    }), /keys: x/],
    [
      "Error with a throwing message getter",
      () => Object.defineProperty(new Error("hidden"), "message", { get: throwing("message") }),
      /^Error$/,
    ],
    [
      "Error with throwing message and name getters",
      () =>
        Object.defineProperty(
          Object.defineProperty(new Error(), "message", { get: throwing("message") }),
          "name",
          { get: throwing("name") },
        ),
      /^Error$/,
    ],
    [
      "Error whose message is an object",
      () => Object.assign(new Error(), { message: { code: 1 } }),
      /^\{"code":1\}$/,
    ],
    ["Error with an empty message", () => new RangeError(""), /^RangeError$/],
    ["cyclic object", () => cyclic, /keys: a, self/],
    ["deep nesting", () => nested(200_000), /^\{"v":\{"v":|keys: v/],
    [
      "Proxy whose traps throw",
      () =>
        new Proxy({}, {
          get: trapAll,
          has: trapAll,
          ownKeys: trapAll,
          getPrototypeOf: trapAll,
          getOwnPropertyDescriptor: trapAll,
        }),
      /./,
    ],
    ["Map", () => new Map([[1, 2]]), /^an object of class Map$/],
    ["thenable", () => ({ then: () => {} }), /^an object of class Object \(keys: then\)$/],
    ["array", () => [1, "two", null], /^\[1,"two",null\]$/],
    ["retryDelayMs getter throws", () => ({
      get retryDelayMs() {
        return throwing("delay")();
      },
    }), /keys/],
    [
      "TerminalError with a throwing message getter",
      () => Object.defineProperty(new TerminalError("x"), "message", { get: throwing("message") }),
      /^TerminalError$/,
    ],
  ];
}

/** Values of every shape: null prototypes, BigInts, Maps, Sets, Dates, nested. */
const anyValue = fc.anything({
  withNullPrototype: true,
  withBigInt: true,
  withMap: true,
  withSet: true,
  withDate: true,
});

Deno.test("describeThrown and the JSON logger never throw and always give non-empty text", () => {
  fc.assert(
    fc.property(
      anyValue,
      (v) => {
        const text = describeThrown(v);
        assert.equal(typeof text, "string");
        assert.ok(text.length > 0);
        assert.equal(typeof describeValue(v), "string");
        JSON.parse(jsonLine("error", ["x", v]));
      },
    ),
    { numRuns: 2_000 },
  );
  for (const [name, make] of catalogue()) {
    const v = make();
    assert.ok(describeThrown(v).length > 0, name);
    JSON.parse(jsonLine("error", [v]));
  }
});

Deno.test("any thrown value: its attempt fails with a readable stored error; the process and its neighbours go on", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const hostile = catalogue();
    const random = fc.sample(
      anyValue,
      { numRuns: 60, seed: 33 },
    );
    // Each hostile value is thrown once synchronously and once as a rejection, between jobs that complete.
    const plan: {
      kind: "ok" | "bad";
      value?: () => unknown;
      re?: RegExp;
      name?: string;
      reject?: boolean;
    }[] = [];
    for (const [name, value, re] of hostile) {
      for (const reject of [false, true]) {
        plan.push({ kind: "ok" }, { kind: "bad", name, value, re, reject }, { kind: "ok" });
      }
    }
    random.forEach((v, i) =>
      plan.push({ kind: "bad", name: `random ${i}`, value: () => v, re: /./, reject: i % 2 === 1 })
    );
    const jobs = await client.enqueueMany(plan.map((_, i) => ({ kind: "t", args: { i }, maxAttempts: 1 })));
    const runs = new Map<number, number>();
    w = await startWorker(client, {
      queues: { default: { maxWorkers: 10 } },
      rescueAfter: 120_000, // a rescue would hide a lost attempt: none may happen here
      heartbeatInterval: 1_000,
      handlers: {
        t: (job) => {
          runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
          const p = plan[(job.args as { i: number }).i];
          if (p.kind === "ok") return { ok: job.id };
          const v = p.value!();
          if (p.reject) return Promise.reject(v);
          throw v;
        },
      },
    });
    await waitFor(
      async () => (await countJobs(client, "state in ('completed', 'failed')")) === plan.length,
      60_000,
      "every job to finish",
    );
    for (const [i, p] of plan.entries()) {
      const job = (await client.getJob(jobs[i].id))!;
      assert.equal(runs.get(job.id), 1, `job ${job.id} ran once`);
      if (p.kind === "ok") {
        assert.equal(job.state, "completed");
        assert.deepEqual(job.result, { ok: job.id });
        continue;
      }
      const what = `${p.name}${p.reject ? " (rejected)" : ""}`;
      assert.equal(job.state, "failed", what);
      assert.equal(job.errors.length, 1, what);
      const error = job.errors[0].error;
      assert.equal(typeof error, "string", what);
      assert.ok(error.length > 0 && error.length <= 65_536 + 40, `${what}: ${error.length} characters`);
      assert.match(error, p.re!, what);
    }
    // The worker is still up and takes more work.
    const after = await client.enqueue("t", { i: 0 });
    await waitFor(async () => (await client.getJob(after.id))?.state === "completed", 10_000, "one more job");
  } finally {
    await w?.stop();
    await drop();
  }
});

import assert from "node:assert/strict";
import {
  DEFAULT_CRON_TIMEZONE,
  fireTimesBetween,
  nextFireAfter,
  validateSchedule,
} from "../../src/cron/schedule.ts";

const at = (iso: string): Date => new Date(iso);
const isoList = (dates: Date[]): string[] => dates.map((d) => d.toISOString());

Deno.test("default time zone is UTC", () => {
  assert.equal(DEFAULT_CRON_TIMEZONE, "UTC");
  assert.equal(
    nextFireAfter("0 3 * * *", undefined, at("2024-01-01T00:00:00Z"))?.toISOString(),
    "2024-01-01T03:00:00.000Z",
  );
});

Deno.test("6 fields: the first field is seconds (per-second schedule)", () => {
  assert.equal(
    nextFireAfter("* * * * * *", "UTC", at("2024-01-01T00:00:00Z"))?.toISOString(),
    "2024-01-01T00:00:01.000Z",
  );
  // Mid-second: the next whole second.
  assert.equal(
    nextFireAfter("* * * * * *", "UTC", at("2024-01-01T00:00:00.500Z"))?.toISOString(),
    "2024-01-01T00:00:01.000Z",
  );
  assert.deepEqual(
    isoList(
      fireTimesBetween("* * * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-01T00:00:03Z"), 100),
    ),
    ["2024-01-01T00:00:01.000Z", "2024-01-01T00:00:02.000Z", "2024-01-01T00:00:03.000Z"],
  );
  // "30 * * * * *" is second 30 of every minute, not minute 30 of every hour.
  assert.deepEqual(
    isoList(
      fireTimesBetween("30 * * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-01T00:02:00Z"), 10),
    ),
    ["2024-01-01T00:00:30.000Z", "2024-01-01T00:01:30.000Z"],
  );
  // 5 fields start at minutes and fire on second 0.
  assert.equal(
    nextFireAfter("*/15 * * * *", "UTC", at("2024-01-01T00:00:00Z"))?.toISOString(),
    "2024-01-01T00:15:00.000Z",
  );
});

Deno.test("nextFireAfter is strictly after", () => {
  assert.equal(
    nextFireAfter("0 3 * * *", "UTC", at("2024-01-01T03:00:00Z"))?.toISOString(),
    "2024-01-02T03:00:00.000Z",
  );
  assert.equal(
    nextFireAfter("0 3 * * *", "UTC", at("2024-01-01T02:59:59.999Z"))?.toISOString(),
    "2024-01-01T03:00:00.000Z",
  );
});

Deno.test('"0 3 * * *" in UTC', () => {
  assert.deepEqual(
    isoList(fireTimesBetween("0 3 * * *", "UTC", at("2024-03-30T00:00:00Z"), at("2024-04-02T00:00:00Z"), 10)),
    ["2024-03-30T03:00:00.000Z", "2024-03-31T03:00:00.000Z", "2024-04-01T03:00:00.000Z"],
  );
});

Deno.test('"0 3 * * *" in Europe/Berlin: 03:00 local is 02:00Z in winter, 01:00Z in summer', () => {
  const tz = "Europe/Berlin";
  assert.equal(
    nextFireAfter("0 3 * * *", tz, at("2024-01-15T00:00:00Z"))?.toISOString(),
    "2024-01-15T02:00:00.000Z",
  );
  assert.equal(
    nextFireAfter("0 3 * * *", tz, at("2024-07-15T00:00:00Z"))?.toISOString(),
    "2024-07-15T01:00:00.000Z",
  );
  // Across the spring-forward night (2024-03-31, 02:00 CET -> 03:00 CEST).
  assert.deepEqual(
    isoList(fireTimesBetween("0 3 * * *", tz, at("2024-03-30T00:00:00Z"), at("2024-04-01T12:00:00Z"), 10)),
    ["2024-03-30T02:00:00.000Z", "2024-03-31T01:00:00.000Z", "2024-04-01T01:00:00.000Z"],
  );
});

Deno.test("DST: a fixed time in the skipped hour runs right after the gap, and once in a repeated hour", () => {
  const tz = "Europe/Berlin";
  // 02:30 does not exist on 2024-03-31: runs at 03:00 CEST (01:00Z).
  assert.deepEqual(
    isoList(fireTimesBetween("30 2 * * *", tz, at("2024-03-30T12:00:00Z"), at("2024-04-01T12:00:00Z"), 10)),
    ["2024-03-31T01:00:00.000Z", "2024-04-01T00:30:00.000Z"],
  );
  // 02:30 happens twice on 2024-10-27: runs at the first (CEST, 00:30Z) only.
  assert.deepEqual(
    isoList(fireTimesBetween("30 2 * * *", tz, at("2024-10-26T12:00:00Z"), at("2024-10-28T12:00:00Z"), 10)),
    ["2024-10-27T00:30:00.000Z", "2024-10-28T01:30:00.000Z"],
  );
  // An interval job runs in both passes of the repeated hour.
  assert.deepEqual(
    isoList(
      fireTimesBetween("0 */30 2 * * *", tz, at("2024-10-27T00:00:00Z"), at("2024-10-27T02:00:00Z"), 10),
    ),
    ["2024-10-27T00:30:00.000Z", "2024-10-27T01:00:00.000Z", "2024-10-27T01:30:00.000Z"],
  );
});

Deno.test("fireTimesBetween: after is exclusive, until is inclusive", () => {
  assert.deepEqual(
    isoList(fireTimesBetween("0 * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-01T03:00:00Z"), 10)),
    ["2024-01-01T01:00:00.000Z", "2024-01-01T02:00:00.000Z", "2024-01-01T03:00:00.000Z"],
  );
  assert.deepEqual(
    isoList(
      fireTimesBetween("0 * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-01T02:59:59.999Z"), 10),
    ),
    ["2024-01-01T01:00:00.000Z", "2024-01-01T02:00:00.000Z"],
  );
});

Deno.test("fireTimesBetween: at most max, the earliest ones, ascending", () => {
  const times = fireTimesBetween(
    "* * * * * *",
    "UTC",
    at("2024-01-01T00:00:00Z"),
    at("2024-01-02T00:00:00Z"),
    5,
  );
  assert.deepEqual(isoList(times), [
    "2024-01-01T00:00:01.000Z",
    "2024-01-01T00:00:02.000Z",
    "2024-01-01T00:00:03.000Z",
    "2024-01-01T00:00:04.000Z",
    "2024-01-01T00:00:05.000Z",
  ]);
  assert.deepEqual(
    fireTimesBetween("* * * * * *", "UTC", at("2024-01-01T00:00:00Z"), at("2024-01-02T00:00:00Z"), 0),
    [],
  );
});

Deno.test("fireTimesBetween: empty and reversed windows", () => {
  const t = at("2024-01-01T00:00:00Z");
  assert.deepEqual(fireTimesBetween("* * * * * *", "UTC", t, t, 10), []);
  assert.deepEqual(fireTimesBetween("* * * * * *", "UTC", t, at("2023-12-31T00:00:00Z"), 10), []);
  assert.deepEqual(fireTimesBetween("0 3 * * *", "UTC", t, at("2024-01-01T02:59:59Z"), 10), []);
});

Deno.test("fireTimesBetween: bad max or dates", () => {
  const a = at("2024-01-01T00:00:00Z");
  const b = at("2024-01-02T00:00:00Z");
  for (const max of [-1, 1.5, Number.NaN, Infinity]) {
    assert.throws(
      () => fireTimesBetween("* * * * *", "UTC", a, b, max),
      /max must be a non-negative integer/,
    );
  }
  assert.throws(
    () => fireTimesBetween("* * * * *", "UTC", new Date(Number.NaN), b, 1),
    /afterExclusive must be a valid Date/,
  );
  assert.throws(
    () => fireTimesBetween("* * * * *", "UTC", a, new Date(Number.NaN), 1),
    /untilInclusive must be a valid Date/,
  );
  assert.throws(() => nextFireAfter("* * * * *", "UTC", new Date(Number.NaN)), /after must be a valid Date/);
});

Deno.test("validateSchedule accepts 5- and 6-field expressions, nicknames and zones", () => {
  for (
    const expr of [
      "0 3 * * *",
      "*/5 * * * *",
      "* * * * * *",
      "0 0 3 * * *",
      "0 9 * * MON-FRI",
      "0 0 L * *",
      "@daily",
    ]
  ) {
    validateSchedule(expr);
    validateSchedule(expr, "UTC");
    validateSchedule(expr, "Europe/Berlin");
    validateSchedule(expr, "America/New_York");
  }
  assert.equal(
    nextFireAfter("@hourly", undefined, at("2024-01-01T00:10:00Z"))?.toISOString(),
    "2024-01-01T01:00:00.000Z",
  );
});

Deno.test("validateSchedule: invalid expressions name the problem", () => {
  const cases: [string, RegExp][] = [
    ["", /it is empty/],
    ["   ", /it is empty/],
    ["0 3 * *", /it has 4 fields/],
    ["bogus", /it has 1 field;/],
    ["0 0 3 * * * 2030", /it has 7 fields/],
    ["2030-01-01T00:00:00", /it has 1 field;/],
    ["61 3 * * *", /minute/i],
    ["0 24 * * *", /hour/i],
    ["0 3 32 * *", /day/i],
    ["0 3 * 13 *", /month/i],
    ["0 3 * * 8", /week|day/i],
    ["/10 * * * *", /step/i],
    ["@sometimes", /unknown nickname; use one of @yearly/],
    ["@reboot", /unknown nickname/],
  ];
  for (const [expr, detail] of cases) {
    assert.throws(
      () => validateSchedule(expr),
      (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /^invalid cron schedule /);
        assert.ok(err.message.includes(JSON.stringify(expr)), err.message);
        assert.match(err.message, detail);
        assert.match(err.message, /expected 5 fields/);
        return true;
      },
      `accepted ${JSON.stringify(expr)}`,
    );
    assert.throws(
      () => nextFireAfter(expr, undefined, new Date()),
      /invalid cron schedule/,
    );
  }
});

Deno.test("validateSchedule: an expression that can never fire", () => {
  assert.throws(() => validateSchedule("0 0 30 2 *"), /"0 0 30 2 \*": it never fires/);
  assert.equal(nextFireAfter("0 0 30 2 *", "UTC", at("2024-01-01T00:00:00Z")), null);
  assert.deepEqual(
    fireTimesBetween("0 0 30 2 *", "UTC", at("2024-01-01T00:00:00Z"), at("2030-01-01T00:00:00Z"), 5),
    [],
  );
});

Deno.test("invalid time zones are errors, not silently local or UTC", () => {
  for (const tz of ["Mars/Olympus", "", "Europe/Berlin ", "Not A Zone"]) {
    assert.throws(
      () => validateSchedule("0 3 * * *", tz),
      (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.equal(
          err.message,
          `unknown time zone ${JSON.stringify(tz)}: use an IANA name such as "UTC" or "Europe/Berlin"`,
        );
        return true;
      },
    );
    assert.throws(() => nextFireAfter("0 3 * * *", tz, new Date()), /unknown time zone/);
    assert.throws(() => fireTimesBetween("0 3 * * *", tz, new Date(0), new Date(), 1), /unknown time zone/);
  }
});

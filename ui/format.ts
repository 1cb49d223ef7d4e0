/** Display helpers: numbers, ages and times. */

export function fmtNum(n: number | null | undefined): string {
  if (n === null || n === undefined) return "–";
  return n.toLocaleString("en-US");
}

/** A count, as a lower bound ("10,000+") when it is approximate. */
export function fmtCount(n: number | null | undefined, approximate = false): string {
  return approximate ? `${fmtNum(n)}+` : fmtNum(n);
}

/** A duration in seconds, two units at most: "45 s", "3 min 20 s", "2 h 5 min", "3 d 4 h". */
export function fmtAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/**
 * "12 s ago", "in 5 min", "just now". Only a time in the past reads "just now": a time still ahead
 * reads "in 1 s" at the least (a cron fire due in a moment is not one that happened).
 */
export function fmtRelative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "–";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const diff = (t - now) / 1000;
  if (diff > 0) return `in ${fmtAge(Math.max(1, Math.ceil(diff))).replace(/ (\d+) (s|min|h)$/, "")}`;
  if (diff > -2) return "just now";
  return `${fmtAge(-diff).replace(/ (\d+) (s|min|h)$/, "")} ago`;
}

/** A duration in milliseconds: "850 ms", "4.2 s", "3 min 20 s". */
export function fmtDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  return fmtAge(ms / 1000);
}

/** Milliseconds from `fromIso` to `toIso` (or to `now` when `toIso` is null); null without a start. */
export function msBetween(
  fromIso: string | null | undefined,
  toIso: string | null | undefined,
  now = Date.now(),
): number | null {
  if (!fromIso) return null;
  const a = Date.parse(fromIso);
  const b = toIso ? Date.parse(toIso) : now;
  return Number.isNaN(a) || Number.isNaN(b) ? null : Math.max(0, b - a);
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** The browser's UTC offset at a date, as "+01:00" (or "UTC" when it is zero). */
export function fmtOffset(d: Date): string {
  const off = -d.getTimezoneOffset();
  if (off === 0) return "UTC";
  const a = Math.abs(off);
  return `${off < 0 ? "-" : "+"}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
}

/** Local time with its offset: "2026-11-22 06:07:33 +01:00" ("… UTC" where local time is UTC). */
export function fmtDateTime(iso: string | null | undefined): string {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${
    pad(d.getMinutes())
  }:${pad(d.getSeconds())} ${fmtOffset(d)}`;
}

/** The same time in UTC: "2026-11-22 05:07:33 UTC" (shown on hover). */
export function fmtUtc(iso: string | null | undefined): string {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** Local "HH:MM" of a time. */
export function fmtClock(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Compact one-line JSON, cut to `max` characters. */
export function jsonPreview(value: unknown, max = 80): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? "null";
  } catch {
    s = String(value);
  }
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
}

export function jsonPretty(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? "null";
  } catch {
    return String(value);
  }
}

/** "waiting_external" → "waiting external". */
export function stateLabel(state: string): string {
  return state.replace(/_/g, " ");
}

/**
 * A progress value in one short line: `{done, of}` (or `{current, total}`) as `3 / 10 (30 %)`, a string as it
 * is, anything else as compact JSON; cut at 80 characters.
 */
export function fmtProgress(value: unknown): string {
  const o = value as Record<string, unknown> | null;
  const done = o && typeof o === "object" ? (o.done ?? o.current) : undefined;
  const of = o && typeof o === "object" ? (o.of ?? o.total) : undefined;
  if (typeof done === "number" && typeof of === "number" && of > 0) {
    return `${done} / ${of} (${Math.floor((done / of) * 100)} %)`;
  }
  if (typeof value === "string") return value.length > 80 ? `${value.slice(0, 79)}…` : value;
  return jsonPreview(value);
}

/** A window in ms as the CLI writes it: 1s, 5m, 500ms. */
export function fmtWindow(ms: number): string {
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1_000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

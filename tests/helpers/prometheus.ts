/**
 * A strict parser of the Prometheus text format (0.0.4) for the tests of `/metrics`: it throws on
 * anything the format does not allow (bad names, label escapes, values, samples of undeclared families,
 * duplicate series, histogram buckets that are not cumulative or do not end at +Inf = _count).
 */

/** One parsed family. */
export interface ParsedFamily {
  name: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help: string;
  /** Series key (`name{a="x",b="y"}`, labels sorted, values unescaped) → value. */
  samples: Map<string, number>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** The key of a series: its name and labels sorted by name. */
export function seriesKey(name: string, labels: Record<string, string> = {}): string {
  const parts = Object.keys(labels).sort().map((k) => `${k}=${JSON.stringify(labels[k])}`);
  return parts.length ? `${name}{${parts.join(",")}}` : name;
}

function parseValue(s: string, line: string): number {
  if (s === "NaN") return NaN;
  if (s === "+Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new Error(`bad value ${s} in: ${line}`);
  return Number(s);
}

/** Parses `{a="x",b="y"}` starting at `i` (the `{`); returns the labels and the index after `}`. */
function parseLabels(line: string, i: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  i++; // {
  while (line[i] !== "}") {
    const eq = line.indexOf("=", i);
    if (eq < 0) throw new Error(`label without = in: ${line}`);
    const name = line.slice(i, eq);
    if (!LABEL.test(name) || name.startsWith("__")) throw new Error(`bad label name ${name} in: ${line}`);
    if (name in labels) throw new Error(`duplicate label ${name} in: ${line}`);
    i = eq + 1;
    if (line[i] !== '"') throw new Error(`label value not quoted in: ${line}`);
    i++;
    let v = "";
    for (;;) {
      const c = line[i];
      if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === "\\") {
        const n = line[i + 1];
        if (n === "\\") v += "\\";
        else if (n === '"') v += '"';
        else if (n === "n") v += "\n";
        else throw new Error(`bad escape \\${n} in: ${line}`);
        i += 2;
        continue;
      }
      v += c;
      i++;
    }
    labels[name] = v;
    i++; // closing quote
    if (line[i] === ",") i++;
    else if (line[i] !== "}") throw new Error(`expected , or } at ${i} in: ${line}`);
  }
  return [labels, i + 1];
}

/** Parses a whole exposition; families by name. */
export function parsePrometheus(text: string): Map<string, ParsedFamily> {
  if (!text.endsWith("\n")) throw new Error("the exposition must end with a line feed");
  const families = new Map<string, ParsedFamily>();
  const familyOf = (sample: string): ParsedFamily => {
    for (const suffix of ["_bucket", "_sum", "_count", ""]) {
      if (!sample.endsWith(suffix)) continue;
      const f = families.get(sample.slice(0, sample.length - suffix.length));
      if (f && (suffix === "" ? f.type !== "histogram" : f.type === "histogram")) return f;
    }
    throw new Error(`sample ${sample} of no declared family`);
  };
  for (const line of text.slice(0, -1).split("\n")) {
    if (line === "") continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a comment
      const [, what, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name ${name}`);
      let f = families.get(name);
      if (what === "TYPE") {
        if (f?.samples.size) throw new Error(`TYPE of ${name} after its samples`);
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(rest)) {
          throw new Error(`bad type ${rest} of ${name}`);
        }
        if (f && f.type !== "untyped") throw new Error(`second TYPE of ${name}`);
        if (!f) families.set(name, f = { name, type: "untyped", help: "", samples: new Map() });
        f.type = rest as ParsedFamily["type"];
      } else {
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ""))) throw new Error(`bad escape in HELP of ${name}`);
        if (!f) families.set(name, f = { name, type: "untyped", help: "", samples: new Map() });
        f.help = rest;
      }
      continue;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`bad sample line: ${line}`);
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`bad sample name ${name}`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === "{") [labels, i] = parseLabels(line, i);
    if (line[i] !== " ") throw new Error(`expected a space before the value in: ${line}`);
    const parts = line.slice(i + 1).split(" ");
    if (parts.length > 2) throw new Error(`extra fields in: ${line}`);
    const value = parseValue(parts[0], line);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`bad timestamp in: ${line}`);
    const f = familyOf(name);
    const key = seriesKey(name, labels);
    if (f.samples.has(key)) throw new Error(`duplicate series ${key}`);
    if (f.type === "counter" && !(value >= 0)) throw new Error(`negative counter ${key}`);
    f.samples.set(key, value);
  }
  for (const f of families.values()) if (f.type === "histogram") checkHistogram(f);
  return families;
}

/** Buckets of each series cumulative with increasing bounds, ending at +Inf equal to _count. */
function checkHistogram(f: ParsedFamily): void {
  const series = new Map<string, { le: number; v: number }[]>();
  for (const [key, v] of f.samples) {
    if (!key.startsWith(`${f.name}_bucket`)) continue;
    const m = /le="([^"]+)"/.exec(key);
    if (!m) throw new Error(`bucket without le: ${key}`);
    const rest = key.slice(`${f.name}_bucket`.length).replace(/,?le="[^"]+"/, "").replace("{,", "{");
    const list = series.get(rest) ?? [];
    list.push({ le: parseValue(m[1], key), v });
    series.set(rest, list);
  }
  for (const [rest, list] of series) {
    for (let i = 1; i < list.length; i++) {
      if (!(list[i].le > list[i - 1].le)) throw new Error(`${f.name}${rest}: le not increasing`);
      if (list[i].v < list[i - 1].v) throw new Error(`${f.name}${rest}: buckets not cumulative`);
    }
    const last = list[list.length - 1];
    if (last.le !== Infinity) throw new Error(`${f.name}${rest}: no +Inf bucket`);
    const countKey = `${f.name}_count${rest === "{}" ? "" : rest}`;
    if (f.samples.get(countKey) !== last.v) {
      throw new Error(`${f.name}${rest}: +Inf bucket differs from _count`);
    }
    if (!f.samples.has(`${f.name}_sum${rest === "{}" ? "" : rest}`)) {
      throw new Error(`${f.name}${rest}: no _sum`);
    }
  }
}

/** Every series of an exposition, flattened: key → value. */
export function flatten(families: Map<string, ParsedFamily>): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families.values()) for (const [k, v] of f.samples) out.set(k, v);
  return out;
}

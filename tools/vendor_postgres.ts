/**
 * Rebuilds src/vendor/postgres from the npm package postgres (its `src/*.js`) and the patch files in
 * tools/vendor_postgres/, applied in name order with `patch -p1`; writes index.d.ts, which takes the types of
 * the npm package at the same version. The version is the one deno.json maps `postgres` to, and the
 * tarball must match deno.lock's integrity for it. README.md is the folder's own and is left alone.
 *
 *   deno run -A tools/vendor_postgres.ts          rewrites the folder
 *   deno run -A tools/vendor_postgres.ts --check  exits 1, naming each file, when the folder differs
 *
 * To change the driver: edit the files, `diff -u` against the package's into a new numbered patch here, run
 * this, and describe the change in src/vendor/postgres/README.md.
 */
const ROOT = new URL("../", import.meta.url).pathname;
const FOLDER = `${ROOT}src/vendor/postgres`;
const PATCHES = `${ROOT}tools/vendor_postgres`;
const REGISTRY = (Deno.env.get("NPM_CONFIG_REGISTRY") || "https://registry.npmjs.org").replace(/\/$/, "");

class VendorError extends Error {}

/** The postgres version deno.json maps, and deno.lock's integrity of it. */
async function pinned(): Promise<{ version: string; integrity: string | null }> {
  const cfg = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  const m = /^npm:postgres@(\d+\.\d+\.\d+)$/.exec(cfg.imports?.postgres ?? "");
  if (!m) throw new VendorError(`deno.json does not map postgres to npm:postgres@x.y.z`);
  const lock = JSON.parse(await Deno.readTextFile(`${ROOT}deno.lock`));
  return { version: m[1], integrity: lock.npm?.[`postgres@${m[1]}`]?.integrity ?? null };
}

/** The files of a .tgz (regular files only), by path. */
async function untgz(bytes: Uint8Array): Promise<Map<string, Uint8Array>> {
  const tar = new Uint8Array(
    await new Response(new Blob([bytes as BlobPart]).stream().pipeThrough(new DecompressionStream("gzip")))
      .arrayBuffer(),
  );
  const files = new Map<string, Uint8Array>();
  const text = (a: Uint8Array) => new TextDecoder().decode(a).replace(/\0.*$/s, "");
  let longName: string | null = null;
  for (let off = 0; off + 512 <= tar.length;) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = parseInt(text(h.subarray(124, 136)).trim() || "0", 8);
    const type = String.fromCharCode(h[156] || 48);
    const prefix = text(h.subarray(345, 500));
    const name = longName ?? (prefix ? `${prefix}/` : "") + text(h.subarray(0, 100));
    const data = tar.subarray(off + 512, off + 512 + size);
    longName = null;
    if (type === "L") longName = text(data);
    else if (type === "0") files.set(name, data.slice());
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

async function sha512(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-512", bytes as BufferSource));
  return `sha512-${btoa(String.fromCharCode(...d))}`;
}

/** The folder's files as this script makes them (README.md aside), by name. */
export async function build(): Promise<Map<string, string>> {
  const { version, integrity } = await pinned();
  const url = `${REGISTRY}/postgres/-/postgres-${version}.tgz`;
  const res = await fetch(url);
  if (!res.ok) throw new VendorError(`${url}: HTTP ${res.status}`);
  const tgz = new Uint8Array(await res.arrayBuffer());
  if (integrity && await sha512(tgz) !== integrity) {
    throw new VendorError(`${url} does not match deno.lock's integrity for postgres@${version}`);
  }
  const work = await Deno.makeTempDir({ prefix: "svc-vendor-postgres-" });
  try {
    for (const [name, data] of await untgz(tgz)) {
      const m = /^package\/src\/([^/]+\.js)$/.exec(name);
      if (m) await Deno.writeFile(`${work}/${m[1]}`, data);
    }
    const patches = [...Deno.readDirSync(PATCHES)].map((e) => e.name).filter((n) => n.endsWith(".patch"))
      .sort();
    for (const p of patches) {
      const out = await new Deno.Command("patch", {
        args: ["-p1", "-d", work, "--forward", "--batch", "--no-backup-if-mismatch", "-i", `${PATCHES}/${p}`],
        stdout: "piped",
        stderr: "piped",
      }).output().catch((e) => {
        throw new VendorError(`cannot run patch (${(e as Error).message}): install it (Debian: patch)`);
      });
      if (!out.success) {
        const why = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
        throw new VendorError(`${p} does not apply to postgres ${version}: ${why.trim()}`);
      }
    }
    const files = new Map<string, string>();
    for (const e of Deno.readDirSync(work)) {
      if (e.isFile && e.name.endsWith(".js")) files.set(e.name, await Deno.readTextFile(`${work}/${e.name}`));
    }
    files.set(
      "index.d.ts",
      `// The types of the vendored postgres.js are those of the npm package it was copied from (README.md),\n` +
        `// at the same version (written by tools/vendor_postgres.ts).\n` +
        `import postgres from "npm:postgres@${version}";\nexport default postgres;\n`,
    );
    return files;
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

/** The differences between the folder and `want`: one line per file. */
export async function compare(want: Map<string, string>): Promise<string[]> {
  const diffs: string[] = [];
  const have = new Set(
    [...Deno.readDirSync(FOLDER)].filter((e) => e.isFile && e.name !== "README.md").map((e) => e.name),
  );
  for (const [name, text] of want) {
    if (!have.has(name)) diffs.push(`${name}: missing`);
    else if (await Deno.readTextFile(`${FOLDER}/${name}`) !== text) diffs.push(`${name}: differs`);
    have.delete(name);
  }
  for (const name of have) diffs.push(`${name}: not made by the package and the patches`);
  return diffs;
}

if (import.meta.main) {
  try {
    const want = await build();
    if (Deno.args.includes("--check")) {
      const diffs = await compare(want);
      if (diffs.length) {
        console.error(`error: src/vendor/postgres does not match postgres.js and tools/vendor_postgres/:`);
        for (const d of diffs) console.error(`  ${d}`);
        console.error("run `deno run -A tools/vendor_postgres.ts` (or add the change as a patch)");
        Deno.exit(1);
      }
      console.log(`src/vendor/postgres matches postgres.js and ${PATCHES.slice(ROOT.length)}/`);
    } else {
      for (const e of Deno.readDirSync(FOLDER)) {
        if (e.isFile && e.name !== "README.md" && !want.has(e.name)) await Deno.remove(`${FOLDER}/${e.name}`);
      }
      for (const [name, text] of want) await Deno.writeTextFile(`${FOLDER}/${name}`, text);
      console.log(`src/vendor/postgres rebuilt from postgres.js and ${PATCHES.slice(ROOT.length)}/`);
    }
  } catch (e) {
    if (!(e instanceof VendorError)) throw e;
    console.error(`error: ${e.message}`);
    Deno.exit(1);
  }
}

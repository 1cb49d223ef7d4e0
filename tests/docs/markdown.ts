/**
 * What the docs tests read from the Markdown files and run: TypeScript code blocks, a project folder
 * that imports `@svc/queue` from these sources (as a user's project maps it to a checkout), and a database
 * of its own for programs that use the default schema.
 */
import postgres from "postgres";
import { DATABASE_URL } from "../helpers/db.ts";
import { ROOT } from "../helpers/packaging.ts";

/** A fenced TypeScript block: its code, the line its fence opens on, and the `##` section it is in. */
export interface CodeBlock {
  code: string;
  line: number;
  section: string;
}

/** The ```ts blocks of a Markdown text (indented ones too, as in lists). */
export function tsBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = markdown.split("\n");
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith("## ")) section = lines[i].slice(3).trim();
    const open = /^(\s*)```(ts|typescript)\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const start = i;
    const code: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i].slice(indent));
    blocks.push({ code: code.join("\n") + "\n", line: start + 1, section });
  }
  return blocks;
}

/**
 * A temporary project folder whose deno.json maps `@svc/queue` and `@svc/queue/testing` to this
 * checkout, with `files` written into it; removed after `fn`.
 */
export async function withProject(
  files: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "svc-docs-" });
  try {
    await Deno.writeTextFile(
      `${dir}/deno.json`,
      JSON.stringify({
        imports: { "@svc/queue": `${ROOT}/mod.ts`, "@svc/queue/testing": `${ROOT}/testing.ts` },
      }),
    );
    for (const [name, text] of Object.entries(files)) await Deno.writeTextFile(`${dir}/${name}`, text);
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** A database of its own (created on the test server, dropped after `fn`): its URL. */
export async function withDatabase(fn: (url: string) => Promise<void>): Promise<void> {
  const name = `svct_db_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
    const url = new URL(DATABASE_URL);
    url.pathname = `/${name}`;
    await fn(url.toString());
  } finally {
    await admin.unsafe(`drop database if exists "${name}" with (force)`).catch(() => {});
    await admin.end();
  }
}

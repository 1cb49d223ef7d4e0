/**
 * The modules of src/ (the vendored driver and the generated assets aside) import one another without a
 * cycle, type-only imports included: a cycle makes a layer impossible to read or test alone.
 */
import assert from "node:assert/strict";

const SRC = new URL("../../src/", import.meta.url);
const IMPORT = /^(?:import|export)[^;]*?from\s+"(\.[^"]+)"/gms;

async function modules(dir: URL, out: Map<string, string[]>): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) {
      if (e.name === "vendor" || e.name === "generated") continue;
      await modules(new URL(`${e.name}/`, dir), out);
    } else if (e.name.endsWith(".ts")) {
      const file = new URL(e.name, dir);
      const text = await Deno.readTextFile(file);
      out.set(file.href, [...text.matchAll(IMPORT)].map((m) => new URL(m[1], file).href));
    }
  }
}

/** The strongly connected components of more than one module (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      for (;;) {
        const w = stack.pop()!;
        onStack.delete(w);
        c.push(w);
        if (w === v) break;
      }
      if (c.length > 1) out.push(c);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

Deno.test("src/ has no import cycle", async () => {
  const graph = new Map<string, string[]>();
  await modules(SRC, graph);
  assert.ok(graph.size > 100, `read ${graph.size} modules`);
  const found = cycles(graph).map((c) => c.map((m) => m.slice(SRC.href.length)).sort());
  assert.deepEqual(found, [], `import cycles: ${JSON.stringify(found)}`);
});

Deno.test("the cycle check finds a cycle when there is one", () => {
  const g = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]);
  assert.deepEqual(cycles(g).map((c) => c.sort()), [["a", "b", "c"]]);
});

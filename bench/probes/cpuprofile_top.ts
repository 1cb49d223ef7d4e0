/** Summarizes a `deno --cpu-prof` profile: self time by function, top 30. */
const f = Deno.args[0];
const p = JSON.parse(await Deno.readTextFile(f));
const self = new Map<number, number>();
const dt = p.timeDeltas as number[];
p.samples.forEach((id: number, i: number) => self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0)));
const byName = new Map<string, number>();
for (const n of p.nodes) {
  const k = `${n.callFrame.functionName || "(anon)"} ${
    n.callFrame.url.split("/").slice(-2).join("/")
  }:${n.callFrame.lineNumber}`;
  byName.set(k, (byName.get(k) ?? 0) + (self.get(n.id) ?? 0));
}
const total = [...byName.values()].reduce((a, b) => a + b, 0);
[...byName.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30).forEach(([k, v]) =>
  console.log((100 * v / total).toFixed(1) + "%", k)
);

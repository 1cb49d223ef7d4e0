/**
 * Summarizes a `deno --cpu-prof` profile: self time by function, top 30. Optional window: only the samples
 * taken between FROM and TO seconds before the profile's end (e.g. the drain, without the setup before it).
 *
 *   deno run -A bench/probes/cpuprofile_top.ts FILE [FROM TO]
 */
const f = Deno.args[0];
const from = Deno.args[1] === undefined ? Infinity : Number(Deno.args[1]);
const to = Number(Deno.args[2] ?? 0);
const p = JSON.parse(await Deno.readTextFile(f));
const dt = p.timeDeltas as number[];
let t = 0;
const at = dt.map((d) => (t += d));
const end = at[at.length - 1] ?? 0;
const self = new Map<number, number>();
p.samples.forEach((id: number, i: number) => {
  if (at[i] < end - from * 1e6 || at[i] > end - to * 1e6) return;
  self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
});
const byName = new Map<string, number>();
for (const n of p.nodes) {
  const k = `${n.callFrame.functionName || "(anon)"} ${
    n.callFrame.url.split("/").slice(-2).join("/")
  }:${n.callFrame.lineNumber}`;
  byName.set(k, (byName.get(k) ?? 0) + (self.get(n.id) ?? 0));
}
const total = [...byName.values()].reduce((a, b) => a + b, 0);
if (Number.isFinite(from)) console.log(`window: ${(total / 1e6).toFixed(2)} s of samples`);
[...byName.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30).forEach(([k, v]) =>
  console.log((100 * v / total).toFixed(1) + "%", k)
);

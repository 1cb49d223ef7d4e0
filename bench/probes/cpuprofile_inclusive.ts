/** Summarizes a `deno --cpu-prof` profile by inclusive time per function (args: FILE [substring filter]). */
const p = JSON.parse(await Deno.readTextFile(Deno.args[0]));
const byId = new Map<number, any>();
for (const n of p.nodes) byId.set(n.id, n);
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map<number, number>();
p.samples.forEach((s: number, i: number) => self.set(s, (self.get(s) ?? 0) + (p.timeDeltas[i] ?? 0)));
const incl = new Map<string, number>();
let total = 0;
for (const [id, t] of self) {
  total += t;
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur; cur = parent.get(cur)) {
    const c = byId.get(cur).callFrame;
    const k = `${c.functionName || "(anon)"} ${c.url.split("/").slice(-2).join("/")}:${c.lineNumber}`;
    if (!seen.has(k)) {
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + t);
    }
  }
}
for (
  const [k, v] of [...incl].filter(([k]) => Deno.args[1] ? k.includes(Deno.args[1]) : true).sort((a, b) =>
    b[1] - a[1]
  ).slice(0, 40)
) console.log((100 * v / total).toFixed(1) + "%", k);

/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Throughput per queue or per kind and depth per queue, over the last hour, from the leader's per-minute
 * samples (never a scan of the jobs). Pick a queue and/or a kind; depth is sampled per queue only, so the
 * depth chart is left out while a kind is picked. Without samples (a server that predates them answers
 * 404) an empty state says so.
 */
import type { ComponentChildren } from "preact";
import { api } from "../api.ts";
import { usePoll } from "../hooks.ts";
import { perMinute } from "../samples.ts";
import { navigate, useLocation } from "../router.ts";
import { useChoices } from "../pages/jobs/filters.tsx";
import { type Series, ThroughputChart } from "./throughput_chart.tsx";

const ATTEMPT_SERIES: Series[] = [
  { key: "completed", label: "Completed", cls: "completed" },
  { key: "retried", label: "Retried", cls: "retried" },
  { key: "failed", label: "Failed", cls: "failed" },
];
const DEPTH_SERIES: Series[] = [{ key: "depth", label: "Available", cls: "depth" }];

function Pick(
  { label, value, options, testid, onPick }: {
    label: string;
    value: string;
    options: string[];
    testid: string;
    onPick: (v: string) => void;
  },
) {
  return (
    <label class="chart-pick">
      {label}
      <select
        data-testid={testid}
        value={value}
        onChange={(e) => onPick((e.currentTarget as HTMLSelectElement).value)}
      >
        <option value="">all</option>
        {(value && !options.includes(value) ? [...options, value] : options).map((o) => (
          <option key={o} value={o}>{o}</option>
        ))}
      </select>
    </label>
  );
}

/**
 * The charts, with the queue and kind picked in the URL's query string of the page at `base`;
 * `unavailable` replaces the empty state of a server without samples.
 */
export function SampleCharts({ base, unavailable }: { base: string; unavailable?: ComponentChildren }) {
  const loc = useLocation();
  const queue = loc.query.get("queue") ?? "";
  const kind = loc.query.get("kind") ?? "";
  const { queues, kinds } = useChoices();
  const onPick = (c: { queue?: string; kind?: string }) => {
    const p = new URLSearchParams();
    const q = c.queue ?? queue;
    const k = c.kind ?? kind;
    if (q) p.set("queue", q);
    if (k) p.set("kind", k);
    navigate(p.toString() ? `${base}?${p}` : base, { replace: true });
  };
  const res = usePoll(
    `samples?queue=${queue}&kind=${kind}`,
    (signal) => api.samples({ queue, kind }, signal),
  );
  const what = [queue && `queue ${queue}`, kind && `kind ${kind}`].filter(Boolean).join(", ") || "all queues";
  const picks = (
    <div class="chart-picks">
      {(["queue", "kind"] as const).map((k) => (
        <Pick
          key={k}
          label={k === "queue" ? "Queue" : "Kind"}
          value={k === "queue" ? queue : kind}
          options={k === "queue" ? queues : kinds}
          testid={`samples-${k}`}
          onPick={(v) => onPick({ [k]: v })}
        />
      ))}
    </div>
  );
  if (res.data === null) {
    if (unavailable) return <>{unavailable}</>;
    return (
      <section class="card" data-testid="samples-unavailable">
        <h2>Throughput and depth by queue and kind</h2>
        <p class="muted">
          Per-minute samples are not available on this server (it answers 404 for them: it predates them).
        </p>
      </section>
    );
  }
  if (res.data === undefined) {
    return (
      <section class="card">
        <h2>Throughput and depth by queue and kind</h2>
        <p class="muted">{res.error ? "The samples could not be loaded." : "Loading…"}</p>
      </section>
    );
  }
  const points = perMinute(res.data);
  const empty = res.data.length === 0
    ? "No samples yet: the leader writes one every minute"
    : "No finished attempts in this window";
  return (
    <div class="stack" data-testid="samples">
      <ThroughputChart
        points={points}
        title={`Attempts per minute, ${what}`}
        testid="samples-throughput"
        series={ATTEMPT_SERIES}
        empty={empty}
      >
        {picks}
      </ThroughputChart>
      {kind
        ? (
          <p class="muted small" data-testid="samples-depth-per-queue">
            Depth is sampled per queue only: clear the kind to see it.
          </p>
        )
        : (
          <ThroughputChart
            points={points.map((p) => ({ minute: p.minute, depth: p.depth }))}
            title={`Depth (available jobs), ${queue ? `queue ${queue}` : "all queues"}`}
            testid="samples-depth"
            series={DEPTH_SERIES}
            legend="last"
            empty={res.data.length === 0 ? empty : "No available jobs sampled in this window"}
          />
        )}
    </div>
  );
}

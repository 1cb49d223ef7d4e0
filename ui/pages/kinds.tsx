/** @jsxImportSource preact */
/**
 * Kinds: per kind its jobs by state and, over the last hour from the leader's per-minute samples, the
 * attempts completed and failed, the failure rate and the run-time p50 and p95; then the per-minute charts
 * of the kind picked (`/kinds?kind=x`). Servers without samples leave those columns empty ("–").
 */
import { api, type KindInfo } from "../api.ts";
import { Link } from "../components/link.tsx";
import { SampleCharts } from "../components/sample_charts.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { fmtDuration, fmtNum } from "../format.ts";
import { usePoll, useTitle } from "../hooks.ts";

/** "12.5%" (one decimal under 10%), "–" when nothing finished. */
export function fmtRate(r: number | null | undefined): string {
  if (r === null || r === undefined || !Number.isFinite(r)) return "–";
  const pct = r * 100;
  return `${pct < 10 && pct > 0 ? pct.toFixed(1) : Math.round(pct)}%`;
}

const NUM_COLS = [
  "Available",
  "Running",
  "Failed",
  "Completed 1 h",
  "Failed 1 h",
  "Retried 1 h",
  "Failure rate",
  "Run p50",
  "Run p95",
];

/** A failure rate of 5% or more stands out. */
const HIGH_FAILURE_RATE = 0.05;

function KindRow({ k }: { k: KindInfo }) {
  const high = (k.failure_rate ?? 0) >= HIGH_FAILURE_RATE;
  const enc = encodeURIComponent(k.kind);
  return (
    <tr data-testid={`kind-row-${k.kind}`}>
      <th scope="row" data-label="Kind">
        <Link href={`/jobs?kind=${enc}`}>
          <code>{k.kind}</code>
        </Link>
      </th>
      <td class="num" data-label="Available">{fmtNum(k.counts.available)}</td>
      <td class="num" data-label="Running">{fmtNum(k.counts.running)}</td>
      <td class="num" data-label="Failed">{fmtNum(k.counts.failed)}</td>
      <td class="num" data-label="Completed 1 h" data-testid={`kind-completed-${k.kind}`}>
        {fmtNum(k.completed_1h)}
      </td>
      <td class="num" data-label="Failed 1 h" data-testid={`kind-failed-${k.kind}`}>{fmtNum(k.failed_1h)}</td>
      <td class="num" data-label="Retried 1 h" data-testid={`kind-retried-${k.kind}`}>
        {fmtNum(k.retried_1h)}
      </td>
      <td
        class={high ? "num text-danger" : "num"}
        data-label="Failure rate"
        data-testid={`kind-rate-${k.kind}`}
      >
        {fmtRate(k.failure_rate)}
      </td>
      <td class="num" data-label="Run p50" data-testid={`kind-p50-${k.kind}`}>{fmtDuration(k.run_p50_ms)}</td>
      <td class="num" data-label="Run p95" data-testid={`kind-p95-${k.kind}`}>{fmtDuration(k.run_p95_ms)}</td>
      <td data-label="Charts">
        <Link href={`/kinds?kind=${enc}`} data-testid={`kind-chart-${k.kind}`}>chart</Link>
      </td>
    </tr>
  );
}

export function Kinds() {
  useTitle("Kinds");
  const res = usePoll("kinds", (signal) => api.kinds(signal));
  const kinds = res.data?.kinds ?? [];

  return (
    <div class="page" data-testid="page-kinds">
      <h1>Kinds</h1>
      <p class="muted">
        The last hour's figures come from the leader's per-minute samples: attempts completed, failed for good
        and failed then retried; the failure rate is (failed + retried) / (completed + failed + retried); and
        run-time percentiles.
      </p>
      {!res.data ? <p class="muted">Loading…</p> : (
        <TableWrap label="Kinds" testid="kinds-table">
          <table class="stacked">
            <thead>
              <tr>
                <th scope="col">Kind</th>
                {NUM_COLS.map((c) => <th key={c} scope="col" class="num">{c}</th>)}
                <th scope="col">
                  <span class="sr-only">Charts</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {kinds.map((k) => <KindRow key={k.kind} k={k} />)}
              {kinds.length === 0 && (
                <tr>
                  <td colSpan={11} class="muted">No job kind yet.</td>
                </tr>
              )}
            </tbody>
          </table>
        </TableWrap>
      )}
      <SampleCharts base="/kinds" />
    </div>
  );
}

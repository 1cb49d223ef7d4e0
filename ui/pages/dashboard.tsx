/** @jsxImportSource preact */
/**
 * Counts by state (running split into started and held: claimed into a runtime's buffer, not started),
 * the per-minute charts from the leader's samples (one source and one time axis for throughput and depth;
 * a server without samples gets the throughput of its finished jobs instead), the per-queue table and the
 * storage card.
 */
import { PausedBadge } from "../components/paused_badge.tsx";
import { api, JOB_STATES, type Queue, type Runtime, unservedText } from "../api.ts";
import { Link } from "../components/link.tsx";
import { StorageCard } from "../components/storage_card.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { ThroughputChart } from "../components/throughput_chart.tsx";
import { SampleCharts } from "../components/sample_charts.tsx";
import { fmtAge, fmtCount, stateLabel } from "../format.ts";
import { usePoll, useTitle } from "../hooks.ts";
import { isUnhealthy } from "./runtimes.tsx";

/**
 * Running jobs split into started and held (prefetched: claimed into a runtime's buffer, not started;
 * their state is running too), by what the live runtimes reported held at their last heartbeat. Held is
 * null when no live runtime reports it (older processes).
 */
export function splitRunning(
  running: number,
  runtimes: Runtime[] | undefined,
): { started: number; held: number | null } {
  const live = (runtimes ?? []).filter((r) => r.live && typeof r.held === "number");
  if (live.length === 0) return { started: running, held: null };
  const held = Math.min(running, live.reduce((n, r) => n + (r.held ?? 0), 0));
  return { started: running - held, held };
}

/** Queue columns shown on the dashboard (the rest are on the Queues page). */
const QUEUE_COLUMNS = [
  "available",
  "running",
  "waiting_external",
  "retryable",
  "scheduled",
  "failed",
] as const;

export function QueueCountsTable({ queues, testidPrefix }: { queues: Queue[]; testidPrefix: string }) {
  return (
    <TableWrap label="Queues" testid="queue-table">
      <table class="stacked">
        <thead>
          <tr>
            <th scope="col">Queue</th>
            <th scope="col">Status</th>
            {QUEUE_COLUMNS.map((s) => <th scope="col" class="num" key={s}>{stateLabel(s)}</th>)}
            <th scope="col" class="num">Oldest available</th>
          </tr>
        </thead>
        <tbody>
          {queues.map((q) => (
            <tr key={q.name} data-testid={`${testidPrefix}-${q.name}`}>
              <th scope="row" data-label="Queue">
                <Link href={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
              </th>
              <td data-label="Status">
                <PausedBadge paused={q.paused} />
              </td>
              {QUEUE_COLUMNS.map((s) => (
                <td
                  class={`num${s === "failed" && q.counts[s] > 0 ? " text-danger" : ""}`}
                  key={s}
                  data-label={stateLabel(s)}
                >
                  {fmtCount(q.counts[s] ?? 0, q.approximate?.includes(s))}
                </td>
              ))}
              <td class="num" data-label="Oldest available">{fmtAge(q.oldest_available_age_seconds)}</td>
            </tr>
          ))}
          {queues.length === 0 && (
            <tr>
              <td colSpan={QUEUE_COLUMNS.length + 3} class="muted">No queues yet.</td>
            </tr>
          )}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** Live runtimes, how many are unhealthy, and who leads. */
function RuntimesCard({ runtimes }: { runtimes: Runtime[] | undefined }) {
  const live = runtimes?.filter((r) => r.live) ?? [];
  const unhealthy = runtimes?.filter(isUnhealthy) ?? [];
  const leader = live.find((r) => r.leader);
  return (
    <section class="card" data-testid="runtimes-card" aria-labelledby="dash-runtimes-title">
      <div class="card-head">
        <h2 id="dash-runtimes-title">Runtimes</h2>
        <Link href="/runtimes" class="more">All runtimes</Link>
      </div>
      {runtimes
        ? (
          <dl class="kv">
            <dt>Live</dt>
            <dd data-testid="runtimes-live">{live.length}</dd>
            <dt>Unhealthy</dt>
            <dd data-testid="runtimes-unhealthy" class={unhealthy.length ? "text-danger" : ""}>
              {unhealthy.length ? <strong>{unhealthy.length}</strong> : "none"}
            </dd>
            <dt>Leader</dt>
            <dd>{leader ? <code>{leader.id}</code> : <strong class="text-danger">none live</strong>}</dd>
          </dl>
        )
        : <p class="muted">Loading…</p>}
    </section>
  );
}

export function Dashboard() {
  useTitle("Dashboard");
  const stats = usePoll("stats", (signal) => api.stats(signal));
  const storage = usePoll("storage", (signal) => api.storage(signal));
  const runtimes = usePoll("runtimes", (signal) => api.runtimes(signal));
  const s = stats.data;
  const split = splitRunning(s?.counts.running ?? 0, runtimes.data?.runtimes);

  return (
    <div class="page" data-testid="page-dashboard">
      <h1>Dashboard</h1>
      {s?.unserved?.length
        ? (
          <div class="banner banner-warn" role="status" data-testid="unserved-banner">
            <strong>Jobs nobody will run:</strong>
            <ul>
              {s.unserved.map((u) => (
                <li key={u.queue} data-testid={`unserved-${u.queue}`}>
                  <Link href={`/jobs?queue=${encodeURIComponent(u.queue)}&state=available`}>{u.queue}</Link>:
                  {" "}
                  {fmtCount(u.available)} available, {unservedText(u)}
                </li>
              ))}
            </ul>
          </div>
        )
        : null}
      <section aria-labelledby="counts-title">
        <h2 id="counts-title" class="sr-only">Jobs by state</h2>
        <ul class="state-grid">
          {JOB_STATES.map((st) => (
            <li key={st}>
              <Link
                href={`/jobs?state=${st}`}
                class={`state-card state-card-${st}`}
                data-testid={`state-card-${st}`}
              >
                <span class="state-card-label">{stateLabel(st)}</span>
                <span class="state-card-value" data-testid={`state-count-${st}`}>
                  {!s
                    ? "…"
                    : st === "running"
                    ? fmtCount(split.started, s.approximate?.includes(st))
                    : fmtCount(s.counts[st] ?? 0, s.approximate?.includes(st))}
                </span>
                {st === "running" && s && split.held !== null && (
                  <span
                    class="state-card-note muted small"
                    data-testid="state-held-running"
                    title="Claimed into a runtime's buffer, not started: they start when a slot frees"
                  >
                    {split.held === 0 ? "none held" : `+ ${fmtCount(split.held)} held`}
                  </span>
                )}
              </Link>
            </li>
          ))}
        </ul>
      </section>
      <SampleCharts
        base="/"
        unavailable={s
          ? <ThroughputChart points={s.throughput} />
          : (
            <section class="card" aria-labelledby="throughput-title">
              <h2 id="throughput-title">Throughput, last 60 minutes</h2>
              <p class="muted">
                {stats.error ? "Not available: the stats could not be loaded." : "Loading…"}
              </p>
            </section>
          )}
      />
      <section class="card" aria-labelledby="dash-queues-title">
        <div class="card-head">
          <h2 id="dash-queues-title">Queues</h2>
          <Link href="/queues" class="more">Manage queues</Link>
        </div>
        {s
          ? <QueueCountsTable queues={s.queues} testidPrefix="dashboard-queue" />
          : <p class="muted">Loading…</p>}
      </section>
      <div class="grid-cards">
        <StorageCard storage={storage.data} />
        <RuntimesCard runtimes={runtimes.data?.runtimes} />
      </div>
    </div>
  );
}

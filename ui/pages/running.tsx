/** @jsxImportSource preact */
/**
 * Running now: for each runtime (host, pid, queues, leader) the jobs it runs with how long each has run,
 * its prefetched jobs apart (claimed into its buffer, not started: named in the runtime's heartbeat as
 * held; storage cannot tell them from started ones), and stuck
 * jobs highlighted: no heartbeat for longer than the rescue window the runtime reports (the leader will
 * rescue them). Handlers a runtime reports stuck (aborted by cancel, deadline or shutdown and not returned
 * within its grace: their attempt has ended but they keep a slot) are listed under the runtime. Each job
 * shows the latest value its handler reported with `ctx.progress`.
 */
import { api, type Job, type Runtime } from "../api.ts";
import { Link } from "../components/link.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { RelTime } from "../components/time.tsx";
import { fmtAge, fmtDuration, fmtProgress, msBetween } from "../format.ts";
import { usePoll, useTitle } from "../hooks.ts";
import { isUnhealthy } from "./runtimes.tsx";

/** How many running jobs the page asks for (the API's bound). */
export const RUNNING_LIMIT = 500;
/** The rescue window of processes that do not report theirs (the worker's default `rescueAfter`). */
const DEFAULT_RESCUE_MS = 90_000;

interface Group {
  id: string;
  runtime: Runtime | null;
  started: Job[];
  prefetched: Job[];
}

/** Stuck: no heartbeat for longer than the rescue window of the runtime that runs it. */
export function isStuck(j: Job, runtime: Runtime | null, now: number): boolean {
  const window = runtime?.rescue_after_ms ?? DEFAULT_RESCUE_MS;
  const since = msBetween(j.heartbeat_at ?? j.claimed_at, null, now);
  return since !== null && since > window;
}

function groups(jobs: Job[], runtimes: Runtime[]): Group[] {
  const byId = new Map<string, Group>();
  for (const r of runtimes) {
    if (r.live) byId.set(r.id, { id: r.id, runtime: r, started: [], prefetched: [] });
  }
  for (const j of jobs) {
    const id = j.attempted_by ?? "(unknown)";
    let g = byId.get(id);
    if (!g) {
      g = { id, runtime: runtimes.find((r) => r.id === id) ?? null, started: [], prefetched: [] };
      byId.set(id, g);
    }
    const held = g.runtime?.held_jobs?.includes(j.id) ?? false;
    (held ? g.prefetched : g.started).push(j);
  }
  return [...byId.values()];
}

function RuntimeHead({ g }: { g: Group }) {
  const r = g.runtime;
  return (
    <div class="card-head running-head">
      <h2>
        {r ? <>{r.hostname} · pid {r.pid}</> : <code>{g.id}</code>}
      </h2>
      {r?.leader && <span class="badge badge-leader">★ leader</span>}
      {r && isUnhealthy(r) && <span class="badge badge-unhealthy">⚠ unhealthy</span>}
      {!r && <span class="badge badge-unhealthy">no runtime row</span>}
      {r && (
        <span class="muted small">
          {r.queues.map((q) => <span class="tag" key={q}>{q}</span>)} rescue after{" "}
          {fmtAge((r.rescue_after_ms ?? DEFAULT_RESCUE_MS) / 1000)} · heartbeat{" "}
          <RelTime iso={r.heartbeat_at} />
        </span>
      )}
    </div>
  );
}

function StartedTable({ g, now }: { g: Group; now: number }) {
  return (
    <TableWrap label={`Jobs running on ${g.id}`}>
      <table class="stacked">
        <thead>
          <tr>
            <th scope="col" class="num">ID</th>
            <th scope="col">Kind</th>
            <th scope="col">Queue</th>
            <th scope="col" class="num">Attempt</th>
            <th scope="col" class="num">Running for</th>
            <th scope="col">Heartbeat</th>
            <th scope="col">Progress</th>
          </tr>
        </thead>
        <tbody>
          {g.started.map((j) => {
            const stuck = isStuck(j, g.runtime, now);
            return (
              <tr
                key={j.id}
                data-testid={`running-row-${j.id}`}
                data-stuck={stuck ? "true" : "false"}
                class={stuck ? "row-unhealthy" : ""}
              >
                <td class="num" data-label="ID">
                  <Link href={`/jobs/${j.id}`}>#{j.id}</Link>
                  {stuck && (
                    <span
                      class="badge badge-unhealthy note"
                      data-testid={`running-stuck-${j.id}`}
                      title="No heartbeat for longer than the rescue window: the leader will rescue it"
                    >
                      ⚠ stuck
                    </span>
                  )}
                </td>
                <td data-label="Kind">
                  <code>{j.kind}</code>
                </td>
                <td data-label="Queue">{j.queue}</td>
                <td class="num" data-label="Attempt">{j.attempt}</td>
                <td class="num" data-label="Running for" data-testid={`running-for-${j.id}`}>
                  {fmtDuration(msBetween(j.attempted_at ?? j.claimed_at, null, now))}
                </td>
                <td data-label="Heartbeat">
                  <RelTime iso={j.heartbeat_at} />
                </td>
                <td data-label="Progress" data-testid={`running-progress-${j.id}`}>
                  {j.progress
                    ? <span title={`reported ${j.progress.at}`}>{fmtProgress(j.progress.value)}</span>
                    : <span class="muted">–</span>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** Why a queue of this runtime claims less than it could: a fleet-wide limit cut its last claim short. */
function ThrottledList({ r }: { r: Runtime }) {
  return (
    <ul class="chips" data-testid={`throttled-${r.id}`}>
      {r.throttled.map((t) => (
        <li key={t.queue} class="chip" data-testid={`throttled-${r.id}-${t.queue}`}>
          <code>{t.queue}</code>: limited ({t.limit === "rate"
            ? "rate limit"
            : t.limit === "per_key"
            ? "per-key limit"
            : "concurrency limit"}) since <RelTime iso={t.since} />
        </li>
      ))}
    </ul>
  );
}

function StuckHandlerList({ r }: { r: Runtime }) {
  return (
    <div class="stuck-handlers" data-testid={`stuck-handlers-${r.id}`}>
      <h3 class="text-danger">Handlers that did not return after their abort ({r.stuck_handlers.length})</h3>
      <p class="muted small">
        Their attempt has ended; each still holds a slot of this runtime until its code returns (it ignores
        ctx.signal).
      </p>
      <ul class="chips">
        {r.stuck_handlers.map((h) => (
          <li
            key={`${h.job_id}:${h.lease}`}
            class="chip chip-stuck"
            data-testid={`stuck-handler-${h.job_id}`}
          >
            <Link href={`/jobs/${h.job_id}`}>#{h.job_id}</Link> <code>{h.kind}</code> {h.reason}{" "}
            <RelTime iso={h.aborted_at} />
          </li>
        ))}
      </ul>
    </div>
  );
}

function Prefetched({ g, now }: { g: Group; now: number }) {
  return (
    <div class="prefetched" data-testid={`prefetched-${g.id}`}>
      <h3>
        Prefetched, not started ({g.prefetched.length})
      </h3>
      <p class="muted small">
        Claimed into this runtime's buffer; they start when a slot frees, or go back to the queue unconsumed.
      </p>
      <ul class="chips">
        {g.prefetched.map((j) => {
          const stuck = isStuck(j, g.runtime, now);
          return (
            <li key={j.id} data-testid={`prefetched-job-${j.id}`} class={stuck ? "chip chip-stuck" : "chip"}>
              <Link href={`/jobs/${j.id}`}>#{j.id}</Link> <code>{j.kind}</code>
              {stuck && <span class="text-danger">⚠ stuck</span>}
            </li>
          );
        })}
      </ul>
    </div>
  );
}

export function Running() {
  useTitle("Running now");
  const res = usePoll("running", async (signal) => {
    const [running, rts] = await Promise.all([api.running(RUNNING_LIMIT, signal), api.runtimes(signal)]);
    return { ...running, runtimes: rts.runtimes };
  });
  const now = Date.now();
  const d = res.data;
  const list = d ? groups(d.jobs, d.runtimes) : [];
  const started = list.reduce((n, g) => n + g.started.length, 0);
  const prefetched = list.reduce((n, g) => n + g.prefetched.length, 0);
  const stuck = list.reduce(
    (n, g) => n + [...g.started, ...g.prefetched].filter((j) => isStuck(j, g.runtime, now)).length,
    0,
  );

  return (
    <div class="page" data-testid="page-running">
      <h1>Running now</h1>
      {!d ? <p class="muted">Loading…</p> : (
        <>
          <p class="summary" data-testid="running-summary">
            <strong>{started}</strong> running{d.truncated ? "+" : ""}, <strong>{prefetched}</strong>{" "}
            prefetched, on <span data-testid="running-runtimes">{list.length}</span>{" "}
            runtime{list.length === 1 ? "" : "s"}
            {stuck > 0
              ? (
                <>
                  , <strong class="text-danger" data-testid="running-stuck-count">{stuck} stuck</strong>
                </>
              )
              : ", none stuck"}
          </p>
          {d.truncated && (
            <p class="muted" data-testid="running-truncated">
              Only the {RUNNING_LIMIT} longest-running jobs are shown.
            </p>
          )}
          {list.length === 0 && (
            <p class="empty" data-testid="running-empty">No runtime is live and no job runs.</p>
          )}
          {list.map((g) => (
            <section class="card" key={g.id} data-testid={`running-runtime-${g.id}`}>
              <RuntimeHead g={g} />
              {g.started.length > 0
                ? <StartedTable g={g} now={now} />
                : <p class="muted" data-testid={`running-idle-${g.id}`}>Runs no job now.</p>}
              {g.prefetched.length > 0 && <Prefetched g={g} now={now} />}
              {(g.runtime?.throttled?.length ?? 0) > 0 && <ThrottledList r={g.runtime!} />}
              {(g.runtime?.stuck_handlers?.length ?? 0) > 0 && <StuckHandlerList r={g.runtime!} />}
            </section>
          ))}
        </>
      )}
    </div>
  );
}

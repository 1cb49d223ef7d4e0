/** @jsxImportSource preact */
/** Worker processes: their queues, readiness and liveness; the leader is marked, unhealthy ones stand out. */
import { api, type Runtime } from "../api.ts";
import { TableWrap } from "../components/table_wrap.tsx";
import { RelTime } from "../components/time.tsx";
import { usePoll, useTitle } from "../hooks.ts";

/** Unhealthy: not ready, or no heartbeat for three intervals (not live). */
export function isUnhealthy(r: Runtime): boolean {
  return !r.ready || !r.live;
}

export function Runtimes() {
  useTitle("Runtimes");
  const res = usePoll("runtimes", (signal) => api.runtimes(signal));
  const runtimes = res.data?.runtimes ?? [];
  const live = runtimes.filter((r) => r.live).length;
  const unhealthy = runtimes.filter(isUnhealthy).length;

  return (
    <div class="page" data-testid="page-runtimes">
      <h1>Runtimes</h1>
      {res.data && (
        <p class="summary" data-testid="runtimes-summary">
          <strong>{live}</strong> live, {unhealthy > 0
            ? <strong class="text-danger">{unhealthy} unhealthy</strong>
            : <span>none unhealthy</span>}
          {", "}
          {runtimes.some((r) => r.leader && r.live)
            ? "leader elected"
            : <strong class="text-danger">no live leader</strong>}
        </p>
      )}
      {!res.data ? <p class="muted">Loading…</p> : (
        <TableWrap label="Runtimes" testid="runtimes-table">
          <table class="stacked">
            <thead>
              <tr>
                <th scope="col">Runtime</th>
                <th scope="col">Host</th>
                <th scope="col" class="num">PID</th>
                <th scope="col">Queues</th>
                <th scope="col">Ready</th>
                <th scope="col">Live</th>
                <th scope="col">Started</th>
                <th scope="col">Heartbeat</th>
              </tr>
            </thead>
            <tbody>
              {runtimes.map((r) => {
                const bad = isUnhealthy(r);
                return (
                  <tr
                    key={r.id}
                    data-testid={`runtime-row-${r.id}`}
                    data-unhealthy={bad ? "true" : "false"}
                    class={bad ? "row-unhealthy" : ""}
                  >
                    <th scope="row" data-label="Runtime">
                      <span>
                        <code>{r.id}</code>
                        {r.leader && (
                          <span
                            class="badge badge-leader"
                            data-testid={`runtime-leader-${r.id}`}
                            title="Leader: runs maintenance and cron"
                          >
                            ★ leader
                          </span>
                        )}
                        {bad && (
                          <span class="badge badge-unhealthy" data-testid={`runtime-unhealthy-${r.id}`}>
                            ⚠ unhealthy
                          </span>
                        )}
                      </span>
                    </th>
                    <td data-label="Host">{r.hostname}</td>
                    <td class="num" data-label="PID">{r.pid}</td>
                    <td data-label="Queues">
                      <span>{r.queues.map((q) => <span class="tag" key={q}>{q}</span>)}</span>
                    </td>
                    <td data-label="Ready">
                      {r.ready ? <span class="ok">yes</span> : <strong class="text-danger">no</strong>}
                    </td>
                    <td data-label="Live">
                      {r.live ? <span class="ok">yes</span> : <strong class="text-danger">no</strong>}
                    </td>
                    <td data-label="Started">
                      <RelTime iso={r.started_at} />
                    </td>
                    <td data-label="Heartbeat">
                      <RelTime iso={r.heartbeat_at} />
                    </td>
                  </tr>
                );
              })}
              {runtimes.length === 0 && (
                <tr>
                  <td colSpan={8} class="muted">No worker runtime has registered.</td>
                </tr>
              )}
            </tbody>
          </table>
        </TableWrap>
      )}
    </div>
  );
}

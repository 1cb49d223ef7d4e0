/** @jsxImportSource preact */
/** Every queue with its counts by state, the age of its oldest available job, and pause/resume. */
import { PausedBadge, PauseToggle } from "../components/paused_badge.tsx";
import { api, JOB_STATES, unservedText } from "../api.ts";
import { Link } from "../components/link.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { fmtAge, fmtCount, stateLabel } from "../format.ts";
import { useAction, usePoll, useTitle } from "../hooks.ts";
import { useApp } from "../state.ts";

export function Queues() {
  useTitle("Queues");
  const { readOnly, notify } = useApp();
  const res = usePoll("queues", (signal) => api.queues(signal));
  const action = useAction();
  const queues = res.data?.queues ?? [];

  const toggle = (name: string, pause: boolean) =>
    action.run(
      `${pause ? "pause" : "resume"}:${name}`,
      () => (pause ? api.pauseQueue(name) : api.resumeQueue(name)),
      () => {
        notify(`Queue ${name} ${pause ? "paused" : "resumed"}.`);
        res.refresh();
      },
    );

  return (
    <div class="page" data-testid="page-queues">
      <h1>Queues</h1>
      {!res.data ? <p class="muted">Loading…</p> : (
        <TableWrap label="Queues" testid="queues-table">
          <table class="stacked wrap-heads">
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col">Status</th>
                {JOB_STATES.map((s) => <th scope="col" class="num" key={s}>{stateLabel(s)}</th>)}
                <th scope="col" class="num">Oldest available</th>
                {!readOnly && (
                  <th scope="col" class="cell-actions">
                    <span class="sr-only">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {queues.map((q) => (
                <tr key={q.name} data-testid={`queue-row-${q.name}`} class={q.paused ? "row-paused" : ""}>
                  <th scope="row" data-label="Queue">
                    <Link href={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
                  </th>
                  <td data-label="Status" data-testid={`queue-status-${q.name}`}>
                    <span>
                      <PausedBadge paused={q.paused} />
                      {unservedText({ ...q, available: q.counts.available }) && (
                        <span class="badge badge-warn" data-testid={`queue-unserved-${q.name}`}>
                          {unservedText({ ...q, available: q.counts.available })}
                        </span>
                      )}
                    </span>
                  </td>
                  {JOB_STATES.map((s) => (
                    <td class="num" key={s} data-label={stateLabel(s)}>
                      {fmtCount(q.counts[s] ?? 0, q.approximate?.includes(s))}
                    </td>
                  ))}
                  <td class="num" data-label="Oldest available">{fmtAge(q.oldest_available_age_seconds)}</td>
                  {!readOnly && (
                    <td class="cell-actions">
                      <div class="row-actions">
                        <PauseToggle
                          paused={q.paused}
                          testid={`queue-${q.name}`}
                          label={`queue ${q.name}`}
                          busy={action.busy !== null}
                          onToggle={(pause) => toggle(q.name, pause)}
                        />
                      </div>
                    </td>
                  )}
                </tr>
              ))}
              {queues.length === 0 && (
                <tr>
                  <td colSpan={JOB_STATES.length + 4} class="muted">No queues yet.</td>
                </tr>
              )}
            </tbody>
          </table>
        </TableWrap>
      )}
    </div>
  );
}

/** @jsxImportSource preact */
/** Cron entries: schedule, next and last fire; trigger now, pause and resume. */
import { PausedBadge, PauseToggle } from "../components/paused_badge.tsx";
import { api } from "../api.ts";
import { Link } from "../components/link.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { RelTime } from "../components/time.tsx";
import { fmtDateTime, jsonPreview } from "../format.ts";
import { useAction, usePoll, useTitle } from "../hooks.ts";
import { useApp } from "../state.ts";

export function Cron() {
  useTitle("Cron");
  const { readOnly, notify } = useApp();
  const res = usePoll("cron", (signal) => api.cron(signal));
  const action = useAction();
  const entries = res.data?.cron ?? [];

  return (
    <div class="page" data-testid="page-cron">
      <h1>Cron</h1>
      {!res.data ? <p class="muted">Loading…</p> : (
        <TableWrap label="Cron entries" testid="cron-table">
          <table class="stacked">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Schedule</th>
                <th scope="col">Kind</th>
                <th scope="col">Queue</th>
                <th scope="col">Args</th>
                <th scope="col">Last fire</th>
                <th scope="col">Next fire</th>
                {!readOnly && (
                  <th scope="col" class="cell-actions">
                    <span class="sr-only">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {entries.map((c) => (
                <tr key={c.name} data-testid={`cron-row-${c.name}`} class={c.paused ? "row-paused" : ""}>
                  <th scope="row" data-label="Name">
                    <span>
                      {c.name}
                      <span data-testid={`cron-status-${c.name}`}>
                        <PausedBadge paused={c.paused} />
                      </span>
                    </span>
                  </th>
                  <td data-label="Schedule" data-testid={`cron-schedule-${c.name}`}>
                    <span>
                      <code>{c.schedule}</code>
                      <div class="muted small">{c.timezone}</div>
                    </span>
                  </td>
                  <td data-label="Kind">
                    <Link href={`/jobs?kind=${encodeURIComponent(c.kind)}`}>
                      <code>{c.kind}</code>
                    </Link>
                  </td>
                  <td data-label="Queue">{c.queue}</td>
                  <td class="cell-args" data-label="Args">
                    <code title={jsonPreview(c.args, 2000)}>{jsonPreview(c.args, 32)}</code>
                  </td>
                  <td data-label="Last fire">
                    <RelTime iso={c.last_fire_at} />
                  </td>
                  <td data-label="Next fire" data-testid={`cron-next-${c.name}`}>
                    {c.paused ? <span class="muted">paused</span> : (
                      <span>
                        <RelTime iso={c.next_fire_at} />
                        <div class="muted small">{fmtDateTime(c.next_fire_at)}</div>
                      </span>
                    )}
                  </td>
                  {!readOnly && (
                    <td class="cell-actions">
                      <div class="row-actions">
                        <button
                          type="button"
                          class="btn btn-small"
                          data-testid={`trigger-cron-${c.name}`}
                          disabled={action.busy !== null}
                          aria-label={`Trigger ${c.name} now`}
                          onClick={() =>
                            action.run(`trigger:${c.name}`, () => api.triggerCron(c.name), (r) => {
                              notify(`${c.name} triggered: job #${r.job.id} enqueued.`);
                              res.refresh();
                            })}
                        >
                          Trigger now
                        </button>
                        <PauseToggle
                          paused={c.paused}
                          testid={`cron-${c.name}`}
                          label={c.name}
                          busy={action.busy !== null}
                          onToggle={(pause) =>
                            action.run(
                              `${pause ? "pause" : "resume"}:${c.name}`,
                              () => (pause ? api.pauseCron(c.name) : api.resumeCron(c.name)),
                              () => {
                                notify(`${c.name} ${pause ? "paused" : "resumed"}.`);
                                res.refresh();
                              },
                            )}
                        />
                      </div>
                    </td>
                  )}
                </tr>
              ))}
              {entries.length === 0 && (
                <tr>
                  <td colSpan={8} class="muted">No cron entries are registered.</td>
                </tr>
              )}
            </tbody>
          </table>
        </TableWrap>
      )}
    </div>
  );
}

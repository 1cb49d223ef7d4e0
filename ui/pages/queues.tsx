/** @jsxImportSource preact */
/**
 * Every queue with its counts by state, the age of its oldest available job, its fleet-wide limits with
 * their use (per key: how many keys hold a unit), and pause/resume and the rate's editor.
 */
import { useState } from "preact/hooks";
import { PausedBadge, PauseToggle } from "../components/paused_badge.tsx";
import { api, JOB_STATES, unservedText } from "../api.ts";
import { Link } from "../components/link.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { fmtAge, fmtCount, fmtWindow, stateLabel } from "../format.ts";
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

  const [editing, setEditing] = useState<string | null>(null);
  const [rate, setRate] = useState("");
  const [per, setPer] = useState("1000");
  const saveRate = (name: string, remove: boolean) =>
    action.run(
      `limit:${name}`,
      () => api.setQueueRate(name, remove ? null : { rate: Number(rate), per_ms: Number(per) }),
      () => {
        notify(
          remove ? `Queue ${name}: limits removed.` : `Queue ${name}: at most ${rate} jobs per ${per} ms.`,
        );
        setEditing(null);
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
                      {q.limit?.concurrency != null && (
                        <span
                          class="badge"
                          data-testid={`queue-concurrency-${q.name}`}
                          title="fleet-wide concurrency limit"
                        >
                          {`concurrency ${q.limit.concurrency} · ${q.limit.in_use.concurrency ?? 0} in use`}
                        </span>
                      )}
                      {q.limit?.per_key != null && (
                        <span
                          class="badge"
                          data-testid={`queue-per-key-${q.name}`}
                          title="fleet-wide limit per limit key: the units each key holds now"
                        >
                          {`per key ${q.limit.per_key} · ${
                            Object.keys(q.limit.in_use.per_key ?? {}).length
                          } keys in use`}
                        </span>
                      )}
                      {q.limit?.rate != null && q.limit.per_ms != null && (
                        <span
                          class="badge"
                          data-testid={`queue-limit-${q.name}`}
                          title="fleet-wide rate limit"
                        >
                          {`rate ${q.limit.rate}/${fmtWindow(q.limit.per_ms)} · ${
                            q.limit.in_use.rate ?? 0
                          } in window`}
                          {q.limit.rate_in_force_at && Date.parse(q.limit.rate_in_force_at) > Date.now()
                            ? " · counting"
                            : ""}
                        </span>
                      )}
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
                        <button
                          type="button"
                          class="btn btn-small"
                          data-testid={`queue-limit-edit-${q.name}`}
                          disabled={action.busy !== null}
                          onClick={() => {
                            setRate(String(q.limit?.rate ?? ""));
                            setPer(String(q.limit?.per_ms ?? 1000));
                            setEditing(editing === q.name ? null : q.name);
                          }}
                        >
                          Rate…
                        </button>
                      </div>
                      {editing === q.name && (
                        <form
                          class="limit-form"
                          data-testid={`queue-limit-form-${q.name}`}
                          onSubmit={(e) => {
                            e.preventDefault();
                            saveRate(q.name, false);
                          }}
                        >
                          <label>
                            at most{" "}
                            <input
                              type="number"
                              min={1}
                              required
                              value={rate}
                              aria-label="jobs claimed"
                              data-testid={`queue-limit-rate-${q.name}`}
                              onInput={(e) => setRate((e.target as HTMLInputElement).value)}
                            />
                          </label>{" "}
                          <label>
                            jobs per{" "}
                            <input
                              type="number"
                              min={1}
                              max={86_400_000}
                              required
                              value={per}
                              aria-label="window in milliseconds"
                              data-testid={`queue-limit-per-${q.name}`}
                              onInput={(e) =>
                                setPer((e.target as HTMLInputElement).value)}
                            />{" "}
                            ms
                          </label>{" "}
                          <button
                            type="submit"
                            class="btn btn-small"
                            data-testid={`queue-limit-save-${q.name}`}
                          >
                            Save
                          </button>{" "}
                          {q.limit && (
                            <button
                              type="button"
                              class="btn btn-small"
                              data-testid={`queue-limit-remove-${q.name}`}
                              onClick={() => saveRate(q.name, true)}
                            >
                              Remove limits
                            </button>
                          )}
                        </form>
                      )}
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

/** @jsxImportSource preact */
/**
 * Every queue with its counts by state, the age of its oldest available job, its fleet-wide limits with
 * their use (per key: how many keys hold a unit), and pause/resume and the limits' editor (rate, concurrency,
 * per key).
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
  const [conc, setConc] = useState("");
  const [perKey, setPerKey] = useState("");
  const [countParked, setCountParked] = useState(false);
  /** The editor's limits: an empty field is no limit of that kind. */
  const edited = () => ({
    ...(rate.trim() ? { rate: Number(rate), per_ms: Number(per) } : {}),
    ...(conc.trim() ? { concurrency: Number(conc) } : {}),
    ...(perKey.trim() ? { per_key: Number(perKey) } : {}),
    count_parked: countParked,
  });
  const saveLimits = (name: string, remove: boolean) =>
    action.run(
      `limit:${name}`,
      () => api.setQueueLimits(name, remove ? null : edited()),
      () => {
        const said = [
          rate.trim() && `at most ${rate} jobs per ${per} ms`,
          conc.trim() && `at most ${conc} at once`,
          perKey.trim() && `at most ${perKey} at once per key`,
        ].filter(Boolean);
        notify(
          remove || said.length === 0
            ? `Queue ${name}: limits removed.`
            : `Queue ${name}: ${said.join(", ")}.`,
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
                            setConc(String(q.limit?.concurrency ?? ""));
                            setPerKey(String(q.limit?.per_key ?? ""));
                            setCountParked(q.limit?.count_parked === true);
                            setEditing(editing === q.name ? null : q.name);
                          }}
                        >
                          Limits…
                        </button>
                      </div>
                      {editing === q.name && (
                        <form
                          class="limit-form"
                          data-testid={`queue-limit-form-${q.name}`}
                          onSubmit={(e) => {
                            e.preventDefault();
                            saveLimits(q.name, false);
                          }}
                        >
                          <LimitField
                            before="at most"
                            value={rate}
                            set={setRate}
                            label="jobs claimed"
                            testid={`queue-limit-rate-${q.name}`}
                          />{" "}
                          <LimitField
                            before="jobs per"
                            after="ms"
                            value={per}
                            set={setPer}
                            label="window in milliseconds"
                            testid={`queue-limit-per-${q.name}`}
                            max={86_400_000}
                            required
                          />{" "}
                          <LimitField
                            before="at most"
                            after="at once"
                            value={conc}
                            set={setConc}
                            label="attempts at once, fleet-wide"
                            testid={`queue-limit-concurrency-${q.name}`}
                          />{" "}
                          <LimitField
                            before="at most"
                            after="at once per key"
                            value={perKey}
                            set={setPerKey}
                            label="attempts at once per limit key"
                            testid={`queue-limit-per-key-${q.name}`}
                          />{" "}
                          <label>
                            <input
                              type="checkbox"
                              checked={countParked}
                              data-testid={`queue-limit-count-parked-${q.name}`}
                              onChange={(e) => setCountParked((e.target as HTMLInputElement).checked)}
                            />{" "}
                            HTTP jobs waiting for their callback count
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
                              onClick={() => saveLimits(q.name, true)}
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

/** A number field of the limits editor: empty is no limit of that kind (unless `required`). */
function LimitField(
  props: {
    before: string;
    after?: string;
    value: string;
    set: (v: string) => void;
    label: string;
    testid: string;
    max?: number;
    required?: boolean;
  },
) {
  return (
    <label>
      {props.before}{" "}
      <input
        type="number"
        min={1}
        max={props.max}
        required={props.required}
        value={props.value}
        placeholder={props.required ? undefined : "any"}
        aria-label={props.label}
        data-testid={props.testid}
        onInput={(e) => props.set((e.target as HTMLInputElement).value)}
      />
      {props.after ? ` ${props.after}` : ""}
    </label>
  );
}

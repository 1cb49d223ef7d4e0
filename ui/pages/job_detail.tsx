/** @jsxImportSource preact */
/**
 * One job: its fields, args, progress (`ctx.progress`), result, every attempt's error, the callback it
 * waits on and the callbacks registered for it; retry and cancel when the state allows them (and the server is
 * writable).
 */
import { api, CANCELLABLE_STATES, type JobDetail as Detail, RETRYABLE_STATES } from "../api.ts";
import { JsonBlock } from "../components/json_block.tsx";
import { Link } from "../components/link.tsx";
import { StateBadge } from "../components/state_badge.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { FullTime, RelTime } from "../components/time.tsx";
import { fmtDuration, fmtProgress } from "../format.ts";
import { useAction, usePoll, useTitle } from "../hooks.ts";
import { attemptLimit, attemptTimeline, errorsAreHistory, runMs, waitMs } from "../job_facts.ts";
import { useApp } from "../state.ts";
import { navigate } from "../router.ts";

function Actions({ detail, onChanged }: { detail: Detail; onChanged: () => void }) {
  const { readOnly, notify } = useApp();
  const action = useAction();
  if (readOnly) return null;
  const job = detail.job;
  const canRetry = RETRYABLE_STATES.includes(job.state);
  const canCancel = CANCELLABLE_STATES.includes(job.state);
  if (!canRetry && !canCancel) return null;
  const canDelete = canRetry; // the finished states

  return (
    <div class="actions">
      {canRetry && (
        <button
          type="button"
          class="btn btn-primary"
          data-testid="retry-button"
          disabled={action.busy !== null}
          onClick={() =>
            action.run("retry", () => api.retryJob(job.id), (r) => {
              notify(`Job #${job.id} retried: now ${r.job.state.replace(/_/g, " ")}.`);
              onChanged();
            })}
        >
          {action.busy === "retry" ? "Retrying…" : "Retry"}
        </button>
      )}
      {canCancel && (
        <button
          type="button"
          class="btn btn-danger"
          data-testid="cancel-button"
          disabled={action.busy !== null}
          onClick={() =>
            action.run("cancel", () => api.cancelJob(job.id), (r) => {
              notify(`Job #${job.id} cancelled: now ${r.job.state.replace(/_/g, " ")}.`);
              onChanged();
            })}
        >
          {action.busy === "cancel" ? "Cancelling…" : "Cancel"}
        </button>
      )}
      {canDelete && (
        <button
          type="button"
          class="btn btn-danger"
          data-testid="delete-button"
          disabled={action.busy !== null}
          onClick={() => {
            if (
              !globalThis.confirm(`Delete job #${job.id} for good? Its args, result and errors go with it.`)
            ) return;
            action.run("delete", () => api.deleteJob(job.id), () => {
              notify(`Job #${job.id} deleted.`);
              navigate("/jobs");
            });
          }}
        >
          {action.busy === "delete" ? "Deleting…" : "Delete"}
        </button>
      )}
    </div>
  );
}

/** "2 of 2 — the kind's limit (the job's own max_attempts is 25)" (D-9: the limit stored at claim). */
function AttemptLimit({ job }: { job: Detail["job"] }) {
  const l = attemptLimit(job);
  return (
    <>
      {job.attempt} of {l.limit}
      {l.byKind && (
        <span class="muted note" data-testid="job-attempt-limit-note">
          — the kind's limit (the job's own max_attempts is {job.max_attempts})
        </span>
      )}
      {!l.stored && job.attempt === 0 && (
        <span class="muted note">(a lower limit of its kind applies from its first claim)</span>
      )}
    </>
  );
}

export function JobDetail({ id }: { id: string }) {
  useTitle(`Job #${id}`);
  const res = usePoll(`job/${id}`, (signal) => api.job(id, signal));
  const d = res.data;

  if (!d) {
    return (
      <div class="page" data-testid="page-job">
        <p class="crumbs">
          <Link href="/jobs">Jobs</Link> / #{id}
        </p>
        <h1>Job #{id}</h1>
        <p class="muted">{res.error?.code === "not_found" ? "There is no job with this id." : "Loading…"}</p>
      </div>
    );
  }

  const j = d.job;
  const timeline = attemptTimeline(j);
  const pendingCallback = d.callbacks.find((c) => c.id === j.callback_id);
  return (
    <div class="page" data-testid="page-job">
      <p class="crumbs">
        <Link href="/jobs" data-testid="back-to-jobs">Jobs</Link> / #{j.id}
      </p>
      <div class="page-head">
        <h1>
          Job #{j.id} <code class="kind">{j.kind}</code>
        </h1>
        <StateBadge state={j.state} testid="job-state" />
        <Actions detail={d} onChanged={res.refresh} />
      </div>

      {d.unserved && (
        <p class="banner banner-warn" role="status" data-testid="job-unserved">
          This job will not run:{" "}
          {d.unserved}. Start a worker that serves its queue with a handler for its kind, or retry it
          elsewhere.
        </p>
      )}
      {pendingCallback && pendingCallback.rejected_count > 0 && (
        <p class="banner banner-warn" role="status" data-testid="job-callback-refused">
          {pendingCallback.rejected_count}{" "}
          callback request{pendingCallback.rejected_count === 1 ? " was" : "s were"}{" "}
          refused for this attempt; the last one: {pendingCallback.last_rejection?.status}{" "}
          <code>{pendingCallback.last_rejection?.code}</code> at{" "}
          <FullTime iso={pendingCallback.last_rejection?.at} />. The function may be signing with another
          secret or calling another path prefix; until a callback is accepted, the job waits for its callback
          deadline.
        </p>
      )}
      <div class="grid-2">
        <section class="card" aria-labelledby="job-fields-title" data-testid="job-detail">
          <h2 id="job-fields-title">Details</h2>
          <dl class="kv">
            <dt>Queue</dt>
            <dd>
              <Link href={`/jobs?queue=${encodeURIComponent(j.queue)}`}>{j.queue}</Link>
            </dd>
            <dt>Priority</dt>
            <dd>{j.priority}</dd>
            <dt>Attempt</dt>
            <dd data-testid="job-attempt">
              <AttemptLimit job={j} />
            </dd>
            <dt>Wait</dt>
            <dd
              data-testid="job-wait"
              title="From enqueue or run_at (the later) to the start of the latest attempt (to its claim while it runs)"
            >
              {fmtDuration(waitMs(j))}
            </dd>
            <dt>Run time</dt>
            <dd
              data-testid="job-run-time"
              title="From the start of the latest attempt to its end; from its claim to now while it runs"
            >
              {fmtDuration(runMs(j))}
              {(j.state === "running" || j.state === "waiting_external") && runMs(j) !== null && (
                <span class="muted">(so far, since its claim)</span>
              )}
            </dd>
            <dt>Tags</dt>
            <dd>
              {j.tags.length
                ? j.tags.map((t) => <span class="tag" key={t}>{t}</span>)
                : <span class="muted">none</span>}
            </dd>
            <dt>Created</dt>
            <dd>
              <FullTime iso={j.created_at} />
            </dd>
            <dt>Run at</dt>
            <dd>
              <FullTime iso={j.run_at} />
            </dd>
            <dt>Claimed</dt>
            <dd>
              <FullTime iso={j.claimed_at} />
            </dd>
            <dt>Attempted</dt>
            <dd title="When the latest attempt's handler started (written with its outcome)">
              <FullTime iso={j.attempted_at} />
            </dd>
            <dt>Attempted by</dt>
            <dd>{j.attempted_by ? <code>{j.attempted_by}</code> : <span class="muted">–</span>}</dd>
            <dt>Heartbeat</dt>
            <dd>
              <FullTime iso={j.heartbeat_at} />
            </dd>
            <dt>Deadline</dt>
            <dd>
              <FullTime iso={j.deadline_at} />
            </dd>
            <dt>Finalized</dt>
            <dd>
              <FullTime iso={j.finalized_at} />
            </dd>
            <dt>Unique key</dt>
            <dd>{j.unique_key ? <code>{j.unique_key}</code> : <span class="muted">–</span>}</dd>
            <dt>Callback id</dt>
            <dd>
              {j.callback_id
                ? <code data-testid="job-callback-id">{j.callback_id}</code>
                : <span class="muted" data-testid="job-callback-id">none</span>}
            </dd>
            <dt>Callback deadline</dt>
            <dd>
              <FullTime
                iso={j.callback_timeout_at ?? pendingCallback?.deadline_at}
                testid="job-callback-deadline"
              />
            </dd>
          </dl>
        </section>
        <div class="stack">
          <section class="card" aria-labelledby="job-args-title">
            <h2 id="job-args-title">Args</h2>
            <JsonBlock value={j.args} testid="job-args" label="Args" />
          </section>
          {j.progress && (
            <section class="card" aria-labelledby="job-progress-title" data-testid="job-progress">
              <h2 id="job-progress-title">Progress</h2>
              <p data-testid="job-progress-summary">
                {fmtProgress(j.progress.value)}{" "}
                <span class="muted small">
                  reported <RelTime iso={j.progress.at} />
                  {j.state === "running" ? "" : " by the latest attempt"}
                </span>
              </p>
              {typeof j.progress.value === "object" && j.progress.value !== null && (
                <JsonBlock value={j.progress.value} testid="job-progress-value" label="Progress" />
              )}
            </section>
          )}
          <section class="card" aria-labelledby="job-result-title">
            <h2 id="job-result-title">Result</h2>
            {j.result === null || j.result === undefined
              ? <p class="muted" data-testid="job-result">No result.</p>
              : <JsonBlock value={j.result} testid="job-result" label="Result" />}
          </section>
          {Object.keys(j.metadata ?? {}).length > 0 && (
            <section class="card" aria-labelledby="job-meta-title">
              <h2 id="job-meta-title">Metadata</h2>
              <JsonBlock value={j.metadata} testid="job-metadata" label="Metadata" />
            </section>
          )}
        </div>
      </div>

      <section class="card" aria-labelledby="job-errors-title" data-testid="job-errors">
        <h2 id="job-errors-title">Attempts ({j.attempt}, {j.errors.length} failed)</h2>
        {errorsAreHistory(j) && (
          <p class="muted" data-testid="job-errors-history">
            Earlier attempts failed; the job went on and is now{" "}
            {j.state.replace(/_/g, " ")}. These errors are its history, not its outcome.
          </p>
        )}
        {timeline.length === 0
          ? <p class="muted">No attempt has run yet.</p>
          : (
            <ol class="timeline" data-testid="attempt-timeline">
              {timeline.map((a, i) => (
                <li
                  key={`${a.attempt}-${i}`}
                  class={a.error ? "attempt attempt-failed" : "attempt"}
                  data-testid={`attempt-${a.attempt}`}
                >
                  <div class="error-head">
                    <strong>Attempt {a.attempt}</strong>
                    <span class="attempt-outcome" data-testid="attempt-outcome">{a.outcome}</span>
                    {a.error && a.outcome === "failed for good" && (
                      <span class="badge state-failed">terminal</span>
                    )}
                  </div>
                  <dl class="attempt-facts">
                    {a.claimedAt && (
                      <>
                        <dt>Claimed</dt>
                        <dd>
                          <FullTime iso={a.claimedAt} />
                        </dd>
                      </>
                    )}
                    {a.startedAt && (
                      <>
                        <dt>Started</dt>
                        <dd>
                          <FullTime iso={a.startedAt} />
                        </dd>
                      </>
                    )}
                    {a.endedAt && (
                      <>
                        <dt>Ended</dt>
                        <dd>
                          <FullTime iso={a.endedAt} />
                        </dd>
                      </>
                    )}
                    {a.ranMs !== null && (
                      <>
                        <dt>Ran</dt>
                        <dd data-testid="attempt-ran">{fmtDuration(a.ranMs)}</dd>
                      </>
                    )}
                    {a.by && (
                      <>
                        <dt>By</dt>
                        <dd>
                          <code>{a.by}</code>
                        </dd>
                      </>
                    )}
                  </dl>
                  {a.error && (
                    <div data-testid={`job-error-${a.attempt}`}>
                      <pre class="error-text" tabIndex={0}>{a.error.error}</pre>
                      {a.error.stack && (
                        <details class="stack" data-testid="error-stack">
                          <summary>Stack</summary>
                          <pre class="error-text stack-text" tabIndex={0}>{a.error.stack}</pre>
                        </details>
                      )}
                    </div>
                  )}
                </li>
              ))}
            </ol>
          )}
      </section>

      <section class="card" aria-labelledby="job-callbacks-title">
        <h2 id="job-callbacks-title">Callbacks ({d.callbacks.length})</h2>
        {d.callbacks.length === 0
          ? <p class="muted" data-testid="job-callbacks-empty">No callback was registered.</p>
          : (
            <TableWrap label="Callbacks" testid="job-callbacks">
              <table class="stacked">
                <thead>
                  <tr>
                    <th scope="col">Id</th>
                    <th scope="col" class="num">Attempt</th>
                    <th scope="col">State</th>
                    <th scope="col">Deadline</th>
                    <th scope="col">Created</th>
                    <th scope="col">Resolved</th>
                    <th scope="col" class="num">Refused</th>
                  </tr>
                </thead>
                <tbody>
                  {d.callbacks.map((c) => (
                    <tr key={c.id} data-testid={`callback-row-${c.id}`}>
                      <td class="cell-id" data-label="Id">
                        <code title={c.id}>{c.id}</code>
                      </td>
                      <td class="num" data-label="Attempt">{c.attempt}</td>
                      <td data-label="State">
                        <span class={`badge cb-${c.state}`}>{c.state.replace(/_/g, " ")}</span>
                      </td>
                      <td data-label="Deadline">
                        <RelTime iso={c.deadline_at} />
                      </td>
                      <td data-label="Created">
                        <RelTime iso={c.created_at} />
                      </td>
                      <td data-label="Resolved" data-testid={`callback-resolved-${c.id}`}>
                        <RelTime iso={c.resolved_at} />
                      </td>
                      <td
                        class="num"
                        data-label="Refused"
                        data-testid={`callback-refused-${c.id}`}
                        title={c.last_rejection
                          ? `last: ${c.last_rejection.status} ${c.last_rejection.code} at ${c.last_rejection.at}`
                          : undefined}
                      >
                        {c.rejected_count}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
      </section>
    </div>
  );
}

/** @jsxImportSource preact */
/**
 * The jobs list's table. On a phone (≤ 640 px) each row is a stacked card (`table.stacked`: every cell
 * on its own line, labelled by its `data-label`), so the list never scrolls sideways. When the server is
 * writable each row has a checkbox (the selection) and its own actions.
 */
import type { ComponentChildren } from "preact";
import type { Job } from "../../api.ts";
import { Link } from "../../components/link.tsx";
import { StateBadge } from "../../components/state_badge.tsx";
import { TableWrap } from "../../components/table_wrap.tsx";
import { RelTime } from "../../components/time.tsx";
import { fmtDuration, jsonPreview } from "../../format.ts";
import { attemptLimit, errorsAreHistory, runMs, waitMs } from "../../job_facts.ts";

/** "2/2" with a note when the limit was the kind's (lower than the job's own max_attempts). */
export function AttemptCell({ job }: { job: Job }) {
  const l = attemptLimit(job);
  return (
    <span
      data-testid={`job-attempts-${job.id}`}
      title={l.byKind
        ? `the kind's limit of ${l.limit} applied (the job's own max_attempts is ${job.max_attempts})`
        : `max attempts ${l.limit}`}
    >
      {job.attempt}/{l.limit}
      {l.byKind && <span class="muted small note">kind limit</span>}
    </span>
  );
}

/** The last error: red when it is the job's outcome, muted history when the job went on (completed...). */
export function LastError({ job }: { job: Job }) {
  const last = job.errors.at(-1);
  if (!last) return null;
  if (errorsAreHistory(job)) {
    const n = job.errors.length;
    return (
      <span class="muted error-history" data-testid={`job-error-history-${job.id}`} title={last.error}>
        {n} earlier failed attempt{n === 1 ? "" : "s"}
      </span>
    );
  }
  return <span class="text-danger" title={last.error}>{last.error}</span>;
}

/** The checkboxes of the rows (the page's "select all" is above the table: a phone hides the header). */
export interface RowSelection {
  ids: Set<number>;
  toggle(id: number, on: boolean): void;
  set(ids: number[]): void;
}

export function JobsTable(
  { jobs, current, selection, actions }: {
    jobs: Job[];
    current: boolean;
    selection?: RowSelection;
    /** A row's own actions (writable servers). */
    actions?: (job: Job) => ComponentChildren;
  },
) {
  const showErrors = jobs.some((j) => j.errors.length > 0);
  const showTags = jobs.some((j) => j.tags.length > 0);
  const now = Date.now();
  return (
    <TableWrap label="Jobs" testid="jobs-table">
      <table class={`stacked jobs-list ${current ? "" : "stale"}`} aria-busy={!current}>
        <thead>
          <tr>
            {selection && (
              <th scope="col" class="cell-select">
                <span class="sr-only">Selected</span>
              </th>
            )}
            <th scope="col" class="num">ID</th>
            <th scope="col">State</th>
            <th scope="col">Kind</th>
            <th scope="col">Queue</th>
            <th scope="col" class="num">Attempt</th>
            <th scope="col">Args</th>
            {showTags && <th scope="col">Tags</th>}
            {showErrors && <th scope="col">Last error</th>}
            <th scope="col" class="num" title="From enqueue or run_at (the later) to the start">Wait</th>
            <th scope="col" class="num" title="From the start of the latest attempt to its end">Run time</th>
            <th
              scope="col"
              title="When it runs or ran (created: on the job's page; wait: from then to its start)"
            >
              Run at
            </th>
            {actions && (
              <th scope="col" class="cell-actions">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {jobs.map((j) => (
            <tr
              key={j.id}
              data-testid={`job-row-${j.id}`}
              data-state={j.state}
              class={selection?.ids.has(j.id) ? "row-selected" : ""}
            >
              {selection && (
                <td class="cell-select" data-label="Select">
                  <input
                    type="checkbox"
                    data-testid={`select-${j.id}`}
                    aria-label={`Select job ${j.id}`}
                    checked={selection.ids.has(j.id)}
                    onChange={(e) => selection.toggle(j.id, (e.currentTarget as HTMLInputElement).checked)}
                  />
                </td>
              )}
              <td class="num" data-label="ID">
                <Link href={`/jobs/${j.id}`} data-testid={`job-link-${j.id}`} aria-label={`Job ${j.id}`}>
                  #{j.id}
                </Link>
              </td>
              <td data-label="State">
                <StateBadge state={j.state} />
              </td>
              <td data-label="Kind">
                <code>{j.kind}</code>
              </td>
              <td data-label="Queue">{j.queue}</td>
              <td class="num" data-label="Attempt">
                <AttemptCell job={j} />
              </td>
              <td class="cell-args" data-label="Args">
                <code title={jsonPreview(j.args, 2000)}>{jsonPreview(j.args, 60)}</code>
              </td>
              {showTags && (
                <td class="cell-tags" data-label="Tags">
                  {j.tags.map((t) => <span class="tag" key={t}>{t}</span>)}
                </td>
              )}
              {showErrors && (
                <td class="cell-error" data-label="Last error">
                  <LastError job={j} />
                </td>
              )}
              <td class="num" data-label="Wait" data-testid={`job-wait-${j.id}`}>
                {fmtDuration(waitMs(j, now))}
              </td>
              <td class="num" data-label="Run time" data-testid={`job-run-${j.id}`}>
                {fmtDuration(runMs(j, now))}
              </td>
              <td data-label="Run at">
                <RelTime iso={j.run_at} />
              </td>
              {actions && (
                <td class="cell-actions" data-testid={`row-actions-${j.id}`}>
                  {actions(j)}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** @jsxImportSource preact */
/**
 * Acting on the jobs of the list one by one: each row's own actions (retry a finished job, cancel an
 * unfinished one, delete a finished one after a confirmation), and a selection of rows (checkboxes) with
 * retry, cancel and delete applied to the selected jobs only (`POST /api/jobs/bulk-<verb>` with `ids`).
 * Selected jobs the action does not apply to are left alone and counted in the notice.
 */
import { useState } from "preact/hooks";
import { api, type BulkIdsResult, CANCELLABLE_STATES, type Job, RETRYABLE_STATES } from "../../api.ts";
import { fmtNum } from "../../format.ts";
import { useAction } from "../../hooks.ts";
import { useApp } from "../../state.ts";

type Verb = "retry" | "cancel" | "delete";

const canRetry = (j: Job) => RETRYABLE_STATES.includes(j.state);
const canCancel = (j: Job) => CANCELLABLE_STATES.includes(j.state);
/** Which jobs an action applies to (delete: finished jobs, the same states as retry). */
export const applies: Record<Verb, (j: Job) => boolean> = {
  retry: canRetry,
  cancel: canCancel,
  delete: canRetry,
};

const jobsText = (n: number) => `${fmtNum(n)} job${n === 1 ? "" : "s"}`;
const DONE: Record<Verb, string> = { retry: "Retried", cancel: "Cancelled", delete: "Deleted" };

/** The selection: ids of the rows checked (kept across polls; rows gone from the page drop out). */
export function useSelection(): {
  ids: Set<number>;
  toggle(id: number, on: boolean): void;
  set(ids: number[]): void;
  clear(): void;
} {
  const [ids, setIds] = useState<Set<number>>(new Set());
  return {
    ids,
    toggle: (id, on) =>
      setIds((prev) => {
        const next = new Set(prev);
        if (on) next.add(id);
        else next.delete(id);
        return next;
      }),
    set: (list) => setIds(new Set(list)),
    clear: () => setIds(new Set()),
  };
}

/** Retry, cancel and delete of one row's job, each offered only in the states it applies to. */
export function RowActions({ job, onDone }: { job: Job; onDone: () => void }) {
  const { notify } = useApp();
  const action = useAction();
  const busy = action.busy !== null;
  const run = (verb: Verb) => {
    if (
      verb === "delete" &&
      !globalThis.confirm(`Delete job #${job.id} for good? Its args, result and errors go with it.`)
    ) return;
    const call = verb === "retry"
      ? () => api.retryJob(job.id)
      : verb === "cancel"
      ? () => api.cancelJob(job.id)
      : () => api.deleteJob(job.id);
    action.run(`${verb}:${job.id}`, call, () => {
      notify(`Job #${job.id} ${DONE[verb].toLowerCase()}.`);
      onDone();
    });
  };
  const button = (verb: Verb, label: string, cls: string) => (
    <button
      type="button"
      class={`btn btn-small ${cls}`}
      data-testid={`row-${verb}-${job.id}`}
      aria-label={`${label} job ${job.id}`}
      disabled={busy}
      onClick={() => run(verb)}
    >
      {label}
    </button>
  );
  return (
    <div class="row-actions">
      {canRetry(job) && button("retry", "Retry", "")}
      {canCancel(job) && button("cancel", "Cancel", "btn-danger")}
      {canRetry(job) && button("delete", "Delete", "btn-ghost")}
    </div>
  );
}

/** "3 selected: Retry 2 · Cancel 1 · Delete 2 · Clear", with a confirmation before cancel and delete. */
export function SelectionBar(
  { jobs, selected, onClear, onDone }: {
    /** The selected jobs as the page shows them (to count what each action applies to). */
    jobs: Job[];
    selected: number;
    onClear: () => void;
    onDone: () => void;
  },
) {
  const { notify } = useApp();
  const action = useAction();
  const [pending, setPending] = useState<Verb | null>(null);
  if (selected === 0) return null;
  const ids = (verb: Verb) => jobs.filter(applies[verb]).map((j) => j.id);

  const act = (verb: Verb) =>
    action.run(`selection-${verb}`, () => api.bulkIds(verb, ids(verb)), (r: BulkIdsResult) => {
      setPending(null);
      const left = selected - r.count;
      notify(
        `${DONE[verb]} ${jobsText(r.count)} of the selection` +
          (left > 0 ? ` (${jobsText(left)} left alone: ${verb} does not apply to them).` : "."),
      );
      onClear();
      onDone();
    });

  return (
    <div class="bulk-bar selection-bar" data-testid="selection-bar" role="region" aria-label="Selected jobs">
      <p data-testid="selection-count">
        <strong>{jobsText(selected)}</strong> selected
      </p>
      {pending
        ? (
          <>
            <p data-testid="selection-confirm-text">
              {pending === "cancel" ? "Cancel" : "Delete"} <strong>{jobsText(ids(pending).length)}</strong>
              {pending === "delete" ? " for good (args, result and errors go with them)" : ""}?
            </p>
            <button
              type="button"
              class="btn btn-danger"
              data-testid={`selection-${pending}-confirm`}
              disabled={action.busy !== null}
              onClick={() => act(pending)}
            >
              Yes, {pending} {jobsText(ids(pending).length)}
            </button>
            <button
              type="button"
              class="btn btn-ghost"
              data-testid={`selection-${pending}-keep`}
              onClick={() =>
                setPending(null)}
            >
              Keep them
            </button>
          </>
        )
        : (
          <>
            {(["retry", "cancel", "delete"] as const).map((verb) => {
              const n = ids(verb).length;
              return (
                <button
                  key={verb}
                  type="button"
                  class={verb === "retry" ? "btn" : "btn btn-danger"}
                  data-testid={`selection-${verb}`}
                  disabled={n === 0 || action.busy !== null}
                  title={n === 0 ? `${verb} applies to none of the selected jobs` : undefined}
                  onClick={() => verb === "retry" ? act(verb) : setPending(verb)}
                >
                  {verb === "retry" ? "Retry" : verb === "cancel" ? "Cancel" : "Delete"} {fmtNum(n)}
                </button>
              );
            })}
            <button type="button" class="btn btn-ghost" data-testid="selection-clear" onClick={onClear}>
              Clear selection
            </button>
          </>
        )}
    </div>
  );
}

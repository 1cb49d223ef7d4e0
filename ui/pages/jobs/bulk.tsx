/** @jsxImportSource preact */
/**
 * Bulk retry and bulk cancel of the jobs a filter matches (state, kind and queue: what the bulk API
 * filters by). Each first asks the server for a dry run (`dry_run: true` → `{count}`) and asks for a
 * confirmation that states how many jobs it touches; only then does it act.
 */
import { useEffect, useState } from "preact/hooks";
import { api, type BulkFilter, CANCELLABLE_STATES, type JobFilter, RETRYABLE_STATES } from "../../api.ts";
import { fmtNum, stateLabel } from "../../format.ts";
import { useAction } from "../../hooks.ts";
import { useApp } from "../../state.ts";

type Verb = "retry" | "cancel";

const plural = (n: number) => `${fmtNum(n)} job${n === 1 ? "" : "s"}`;

/** The filter in words: "failed jobs of kind x in queue y". */
function describe(verb: Verb, f: BulkFilter) {
  return (
    <>
      {f.state ? stateLabel(f.state) : verb === "retry" ? "finished" : "unfinished"} job(s)
      {f.kind
        ? (
          <>
            {" "}of kind <code>{f.kind}</code>
          </>
        )
        : null}
      {f.queue
        ? (
          <>
            {" "}in queue <code>{f.queue}</code>
          </>
        )
        : null}
    </>
  );
}

/** Which bulk actions a filter allows: retry needs a finished state, cancel an unfinished one (or none). */
export function bulkVerbs(filter: JobFilter): Verb[] {
  const verbs: Verb[] = [];
  if (filter.state && RETRYABLE_STATES.includes(filter.state)) verbs.push("retry");
  if (!filter.state || CANCELLABLE_STATES.includes(filter.state)) verbs.push("cancel");
  return verbs;
}

export function BulkBar({ filter, onDone }: { filter: JobFilter; onDone: () => void }) {
  const { notify } = useApp();
  const action = useAction();
  /** The action being confirmed, with the count its dry run gave. */
  const [pending, setPending] = useState<{ verb: Verb; count: number } | null>(null);
  useEffect(() => setPending(null), [filter.state, filter.kind, filter.queue, filter.tag, filter.q]);
  const verbs = bulkVerbs(filter);
  const f: BulkFilter = {
    state: filter.state || undefined,
    kind: filter.kind || undefined,
    queue: filter.queue || undefined,
  };
  const call = (verb: Verb, dryRun: boolean) =>
    verb === "retry" ? api.bulkRetry(f, { dryRun }) : api.bulkCancel(f, { dryRun });

  if (filter.tag || filter.q) {
    return (
      <div class="bulk-bar" data-testid="bulk-bar">
        <p class="muted" data-testid="bulk-retry-unavailable">
          Bulk retry and cancel filter by state, kind and queue only: clear the tag and search fields to act
          on every job that matches.
        </p>
      </div>
    );
  }

  const act = (verb: Verb) =>
    action.run(`bulk-${verb}`, () => call(verb, false), (r) => {
      setPending(null);
      notify(`${verb === "retry" ? "Retried" : "Cancelled"} ${plural(r.count)}.`);
      onDone();
    });

  return (
    <div class={pending ? "bulk-bar" : "bulk-bar bulk-bar-idle"} data-testid="bulk-bar">
      {pending
        ? (
          <>
            <p data-testid="bulk-confirm-text">
              {pending.count === 0 ? <>No {describe(pending.verb, f)} to {pending.verb}.</> : (
                <>
                  {pending.verb === "retry" ? "Retry" : "Cancel"} <strong>{plural(pending.count)}</strong>
                  {" "}
                  ({describe(pending.verb, f)}, not only this page)?
                </>
              )}
            </p>
            {pending.count > 0 && (
              <button
                type="button"
                class={pending.verb === "retry" ? "btn btn-primary" : "btn btn-danger"}
                data-testid={`bulk-${pending.verb}-confirm`}
                disabled={action.busy !== null}
                onClick={() => act(pending.verb)}
              >
                Yes, {pending.verb} {plural(pending.count)}
              </button>
            )}
            <button
              type="button"
              class="btn btn-ghost"
              data-testid={`bulk-${pending.verb}-cancel`}
              onClick={() => setPending(null)}
            >
              {pending.count > 0 ? "Keep them" : "Close"}
            </button>
          </>
        )
        : verbs.map((verb) => (
          <button
            key={verb}
            type="button"
            class={verb === "retry" ? "btn" : "btn btn-danger"}
            data-testid={`bulk-${verb}-button`}
            disabled={action.busy !== null}
            onClick={() =>
              action.run(
                `count-${verb}`,
                () => call(verb, true),
                (r) => setPending({ verb, count: r.count }),
              )}
          >
            {verb === "retry" ? "Retry" : "Cancel"} all {describe(verb, f)} matching these filters…
          </button>
        ))}
    </div>
  );
}

/** @jsxImportSource preact */
/**
 * The storage engine in words: which engine takes the writes, where the canonical → queue_storage
 * transition stands and what its next step is (with what blocks it); while the mixed transition runs, its
 * progress (the canonical backlog left, against the largest backlog this page has seen).
 */
import { useRef } from "preact/hooks";
import type { Storage } from "../api.ts";
import { fmtNum } from "../format.ts";

const TRANSITION_STEPS = ["canonical", "prepared", "mixed_transition", "active"];

const ENGINE_WORDS: Record<string, string> = {
  canonical: "one jobs table whose rows are updated in place (the older release line's engine)",
  queue_storage:
    "append-only ring partitions reclaimed by TRUNCATE, so dead rows do not grow with throughput",
};

/** What a transition state means, in a sentence. */
export function stateWords(s: Storage): string {
  switch (s.state ?? s.transition) {
    case "canonical":
      return s.queue_storage_ready
        ? "Every job is in the canonical table. Queue storage is installed but not prepared: nothing runs on it yet."
        : "Every job is in the canonical table; queue storage is not installed.";
    case "prepared":
      return "Queue storage is prepared, but every write and every execution still go to canonical; canonical-only runtimes may still run.";
    case "mixed_transition":
      return "New jobs go to queue storage while drain workers finish the canonical backlog in place.";
    case "active":
      return "Only queue storage runs and takes writes; canonical's finished jobs stay readable until retention removes them.";
    default:
      return `Unknown state ${s.state ?? s.transition}.`;
  }
}

/** The next step in words, or null once the transition is complete. */
function nextWords(s: Storage): string | null {
  switch (s.state ?? s.transition) {
    case "canonical":
      return "prepare queue storage (checks that it is installed and ready)";
    case "prepared":
      return "enter the mixed transition once every live runtime can execute queue storage";
    case "mixed_transition":
      return "finalize once the canonical backlog is 0";
    default:
      return null;
  }
}

function Progress({ backlog }: { backlog: number }) {
  const most = useRef(0);
  most.current = Math.max(most.current, backlog);
  const done = most.current - backlog;
  const pct = most.current === 0 ? 100 : Math.round((done / most.current) * 100);
  return (
    <div class="transition-progress" data-testid="storage-progress">
      <progress
        max={most.current || 1}
        value={most.current ? done : 1}
        aria-label="Canonical backlog drained"
      />
      <span data-testid="storage-backlog">
        {fmtNum(backlog)} job{backlog === 1 ? "" : "s"} left in canonical
        {most.current > 0 ? ` (${pct}% of ${fmtNum(most.current)} drained)` : ""}
      </span>
    </div>
  );
}

export function StorageCard({ storage }: { storage: Storage | undefined }) {
  const state = storage?.state ?? storage?.transition;
  return (
    <section class="card" data-testid="storage-card" aria-labelledby="storage-title">
      <h2 id="storage-title">Storage</h2>
      {storage
        ? (
          <>
            <p data-testid="storage-words">
              New jobs are written to <code data-testid="storage-engine">{storage.engine}</code>:{" "}
              {ENGINE_WORDS[storage.engine] ?? "an engine this UI does not know"}.
            </p>
            <ol class="steps" aria-label="Transition steps">
              {TRANSITION_STEPS.map((s) => (
                <li
                  key={s}
                  class={s === state ? "step-current" : ""}
                  aria-current={s === state ? "step" : undefined}
                >
                  {s.replace(/_/g, " ")}
                </li>
              ))}
            </ol>
            <p data-testid="storage-state-words">
              <span class="sr-only">Transition state:</span>
              <code data-testid="storage-transition" class="note-before">{state}</code> {stateWords(storage)}
            </p>
            {state === "mixed_transition" && <Progress backlog={storage.canonical_backlog ?? 0} />}
            {nextWords(storage)
              ? (
                <p data-testid="storage-next">
                  Next step: {nextWords(storage)}
                  {storage.next_step && (
                    <>
                      {" "}— <code>{storage.next_step}</code>
                    </>
                  )}.
                </p>
              )
              : <p class="muted" data-testid="storage-next">The transition is complete: no step is left.</p>}
            {(storage.blockers?.length ?? 0) > 0 && (
              <div data-testid="storage-blockers">
                <p class="small">What blocks it now:</p>
                <ul class="small">
                  {storage.blockers!.map((b) => <li key={b}>{b}</li>)}
                </ul>
              </div>
            )}
            {storage.runtimes && state !== "active" && (
              <p class="muted small" data-testid="storage-runtimes">
                Live runtimes: {storage.runtimes.queue_storage_capable} can run queue storage,{" "}
                {storage.runtimes.canonical_only} canonical only.
                {storage.abort_possible ? " Abort is still possible." : ""}
              </p>
            )}
          </>
        )
        : <p class="muted">Loading…</p>}
    </section>
  );
}

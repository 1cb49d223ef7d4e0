/** @jsxImportSource preact */
import type { Storage } from "../api.ts";

const TRANSITION_STEPS = ["canonical", "prepared", "mixed_transition", "active"];

/** Storage engine and where the canonical → queue_storage transition stands. */
export function StorageCard({ storage }: { storage: Storage | undefined }) {
  return (
    <section class="card" data-testid="storage-card" aria-labelledby="storage-title">
      <h2 id="storage-title">Storage</h2>
      {storage
        ? (
          <dl class="kv">
            <dt>Engine</dt>
            <dd>
              <code data-testid="storage-engine">{storage.engine}</code>
            </dd>
            <dt>Transition</dt>
            <dd>
              <code data-testid="storage-transition">{storage.transition}</code>
              <ol class="steps" aria-label="Transition steps">
                {TRANSITION_STEPS.map((s) => (
                  <li
                    key={s}
                    class={s === storage.transition ? "step-current" : ""}
                    aria-current={s === storage.transition ? "step" : undefined}
                  >
                    {s.replace(/_/g, " ")}
                  </li>
                ))}
              </ol>
            </dd>
          </dl>
        )
        : <p class="muted">Loading…</p>}
    </section>
  );
}

/** @jsxImportSource preact */
import { stateLabel } from "../format.ts";

/** A job state as a coloured pill (the colour is never the only cue: the text says it). */
export function StateBadge({ state, testid }: { state: string; testid?: string }) {
  return (
    <span class={`badge state-${state}`} data-testid={testid}>
      {stateLabel(state)}
    </span>
  );
}

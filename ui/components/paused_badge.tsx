/** @jsxImportSource preact */

/** "paused" or "active", for queues and cron schedules. */
export function PausedBadge({ paused }: { paused: boolean }) {
  return paused ? <span class="badge badge-paused">paused</span> : <span class="badge badge-ok">active</span>;
}

/**
 * The Pause or Resume button of a queue or cron schedule: `testid` and `label` name the thing
 * (`pause-queue-x`/`resume-queue-x`, "Pause queue x"); `onToggle(pause)` is called with the new state.
 */
export function PauseToggle(
  { paused, testid, label, busy, onToggle }: {
    paused: boolean;
    testid: string;
    label: string;
    busy: boolean;
    onToggle: (pause: boolean) => void;
  },
) {
  const verb = paused ? "Resume" : "Pause";
  return (
    <button
      type="button"
      class="btn btn-small"
      data-testid={`${verb.toLowerCase()}-${testid}`}
      disabled={busy}
      aria-label={`${verb} ${label}`}
      onClick={() => onToggle(!paused)}
    >
      {verb}
    </button>
  );
}

/** @jsxImportSource preact */

/** "paused" or "active", for queues and cron schedules. */
export function PausedBadge({ paused }: { paused: boolean }) {
  return paused ? <span class="badge badge-paused">paused</span> : <span class="badge badge-ok">active</span>;
}

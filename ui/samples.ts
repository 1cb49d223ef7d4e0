/** The leader's per-minute samples (GET /api/stats/samples) as one point per minute for the charts. */
import type { Sample } from "./api.ts";

export interface MinutePoint {
  minute: string;
  completed: number;
  failed: number;
  retried: number;
  /** Sum of the sampled queues' depths; null when no depth row was sampled that minute. */
  depth: number | null;
}

const MINUTE = 60_000;

/**
 * The last `minutes` finished minutes, oldest first, each with the attempts of the kind rows summed and
 * the depths of the queue rows summed. Minutes without a sample are zeros (depth null).
 */
export function perMinute(samples: Sample[], minutes = 60, now = Date.now()): MinutePoint[] {
  const end = Math.floor(now / MINUTE) * MINUTE; // the current minute is not finished
  const points = new Map<number, MinutePoint>();
  for (let i = minutes; i >= 1; i--) {
    const t = end - i * MINUTE;
    points.set(t, { minute: new Date(t).toISOString(), completed: 0, failed: 0, retried: 0, depth: null });
  }
  for (const s of samples) {
    const p = points.get(Math.floor(Date.parse(s.minute) / MINUTE) * MINUTE);
    if (!p) continue;
    if (s.kind === null) {
      p.depth = (p.depth ?? 0) + (s.depth ?? 0);
    } else {
      p.completed += s.completed;
      p.failed += s.failed;
      p.retried += s.retried;
    }
  }
  return [...points.values()];
}

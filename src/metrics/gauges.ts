/**
 * Gauges: a worker's in-flight and prefetched attempts per queue (read from its dispatchers when
 * collected), and the depth and oldest available age of every queue, read through the engine's one depth
 * definition at most every `DEPTH_EVERY_MS`, only when something collects them (a scrape of `/metrics`,
 * an OpenTelemetry export) and only in the leader (and `svc serve`), never per job. Workers of one
 * process on the same schema share one depth reading.
 */
import type { StorageEngine } from "../storage/engine.ts";
import type { QueueLimitInfo } from "../types.ts";
import type { GaugeReading } from "./registry.ts";
import type { SvcMetrics } from "./svc_metrics.ts";
import type { Dispatcher } from "../worker/dispatcher.ts";

/** The depth gauges are read from the database at most this often. */
export const DEPTH_EVERY_MS = 5_000;

/** Depth readers of this process by schema, with the predicates of the processes' users that want them read. */
const depthReaders = new Map<string, { users: Set<() => boolean>; stop: () => void }>();

/** Registers the gauges of a worker; returns their removal (at shutdown). */
export function workerGauges(
  m: SvcMetrics,
  engine: StorageEngine,
  schema: string,
  dispatchers: Map<string, Dispatcher>,
  isLeader: () => boolean,
  stuckByQueue: () => Map<string, number> = () => new Map(),
  limits?: () => Promise<QueueLimitInfo[]>,
): () => Promise<void> {
  const perQueue = (value: (d: Dispatcher) => number) => (): GaugeReading[] =>
    [...dispatchers].map(([queue, d]) => [[m.queueLabel(queue)], value(d)]);
  const removals = [
    m.f.svc_jobs_in_flight.source(perQueue((d) => d.running)),
    m.f.svc_jobs_prefetched.source(perQueue((d) => d.held().length)),
    m.f.svc_jobs_stuck.source(() => {
      const byQueue = stuckByQueue();
      return [...dispatchers.keys()].map((queue) => [[m.queueLabel(queue)], byQueue.get(queue) ?? 0]);
    }),
  ];
  // Only the leader reads the depths: one process of a deployment pays for them.
  const stopDepth = depthGauges(m, engine, schema, isLeader, limits);
  return () => {
    removals.forEach((r) => r());
    stopDepth();
    return Promise.resolve();
  };
}

/**
 * Registers the depth and oldest-age gauges of every queue of a schema (once per process and schema,
 * however many workers and servers use it), read while `wanted()` of some user holds; returns this user's
 * removal.
 */
export function depthGauges(
  m: SvcMetrics,
  engine: StorageEngine,
  schema: string,
  wanted: () => boolean = () => true,
  limits?: () => Promise<QueueLimitInfo[]>,
): () => void {
  let shared = depthReaders.get(schema);
  if (!shared) {
    const users = new Set<() => boolean>();
    const cached = cachedReading(() => engine.queueDepths());
    const read = () => ([...users].some((w) => w()) ? cached() : Promise.resolve([]));
    const cachedLimits = limits ? cachedReading(limits) : null;
    const readLimits = () =>
      cachedLimits && [...users].some((w) => w()) ? cachedLimits() : Promise.resolve([] as QueueLimitInfo[]);
    const stops = [
      m.f.svc_queue_depth.source(async () => (await read()).map((d) => [[m.queueLabel(d.queue)], d.depth])),
      m.f.svc_queue_oldest_available_age_seconds.source(async () =>
        (await read()).flatMap((d) =>
          d.oldestAvailableAgeSeconds === null ? [] : [[[m.queueLabel(d.queue)], d.oldestAvailableAgeSeconds]]
        )
      ),
      // Each limit's use: attempts open (concurrency), jobs claimed in the current window (rate), attempts
      // holding a key's unit, all keys together (per_key).
      m.f.svc_limit_in_use.source(async () =>
        (await readLimits()).flatMap((l) =>
          [
            ...(l.inUse.concurrency === null
              ? []
              : [[[m.queueLabel(l.queue), "concurrency"], l.inUse.concurrency]]),
            ...(l.inUse.rate === null ? [] : [[[m.queueLabel(l.queue), "rate"], l.inUse.rate]]),
            ...(l.inUse.perKey === null ? [] : [[
              [m.queueLabel(l.queue), "per_key"],
              Object.values(l.inUse.perKey).reduce((a, n) => a + n, 0),
            ]]),
          ] as GaugeReading[]
        )
      ),
    ];
    shared = { users, stop: () => stops.forEach((s) => s()) };
    depthReaders.set(schema, shared);
  }
  const entry = shared;
  const user = () => wanted();
  entry.users.add(user);
  return () => {
    if (!entry.users.delete(user)) return;
    if (entry.users.size === 0) {
      entry.stop();
      depthReaders.delete(schema);
    }
  };
}
/** `read()` (the depths, the limits), read again only when the last reading is older than `DEPTH_EVERY_MS`. */
function cachedReading<T>(read: () => Promise<T>): () => Promise<T> {
  let last: Promise<T> | null = null;
  let at = 0;
  return () => {
    if (!last || Date.now() - at >= DEPTH_EVERY_MS) {
      at = Date.now();
      last = read();
      last.catch(() => {
        last = null; // read again at the next collection
      });
    }
    return last;
  };
}

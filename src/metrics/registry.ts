/**
 * A small metrics registry: counters, histograms and gauges with fixed label names, kept in the process
 * for `GET /metrics` (Prometheus text format 0.0.4) and recorded at the same time through
 * `@opentelemetry/api`, so that an OpenTelemetry SDK registered before the worker starts (or Deno's
 * built-in exporter, `OTEL_DENO=true`) exports them too. Without an SDK the API records nothing and costs
 * a call to a no-op.
 *
 * The hot path uses handles resolved ahead (`family.with(queue, kind)` once, then `inc()` / `observe()`
 * per job): no allocation per event. Label values are bounded by the caller (src/metrics/svc_metrics.ts
 * maps unknown kinds and excess queues to `other`); the writer escapes them.
 */
import { type Attributes, type Meter, metrics as otelMetrics } from "npm:@opentelemetry/api@1.10.0";

/** Bucket bounds in seconds for durations, from 5 ms to 5 minutes. */
export const DURATION_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  300,
];

/** A counter with its label values resolved. */
export interface CounterHandle {
  inc(n?: number): void;
}

/** A histogram with its label values resolved. */
export interface HistogramHandle {
  observe(value: number): void;
}

/** Runs `fn` and observes its run time in seconds (nothing is measured without a handle). */
export async function timed<T>(h: HistogramHandle | undefined, fn: () => Promise<T>): Promise<T> {
  if (!h) return await fn();
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    h.observe((performance.now() - t0) / 1000);
  }
}

/** A handle that records nothing (metrics off). */
export const NOOP_HANDLE: CounterHandle & HistogramHandle = { inc() {}, observe() {} };

interface OtelCounter {
  add(n: number, attrs?: Attributes): void;
}
interface OtelHistogram {
  record(v: number, attrs?: Attributes): void;
}

/** `name{a="x",b="y"}` label text of a set of values (escaped). */
function labelText(names: readonly string[], values: readonly string[], extra = ""): string {
  const parts = names.map((n, i) => `${n}="${escapeLabelValue(values[i])}"`);
  if (extra) parts.push(extra);
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** Escapes a label value for the text format: backslash, double quote and line feed. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** Escapes HELP text: backslash and line feed. */
function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** A number as the text format writes it. */
function num(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

class CounterSeries implements CounterHandle {
  value = 0;
  constructor(
    readonly values: readonly string[],
    private readonly otel: OtelCounter,
    private readonly attrs: Attributes,
  ) {}
  inc(n = 1): void {
    this.value += n;
    this.otel.add(n, this.attrs);
  }
}

class HistogramSeries implements HistogramHandle {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(
    readonly values: readonly string[],
    private readonly bounds: readonly number[],
    private readonly otel: OtelHistogram,
    private readonly attrs: Attributes,
  ) {
    this.counts = new Array(bounds.length).fill(0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    // Non-cumulative counts per bucket; the writer adds them up.
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]) {
        this.counts[i]++;
        break;
      }
    }
    this.otel.record(v, this.attrs);
  }
}

/** What a family contributes to the text. */
interface Family {
  name: string;
  write(out: string[]): Promise<void>;
}

/** Series of one metric, keyed by their label values. */
abstract class SeriesFamily<S extends { values: readonly string[] }> implements Family {
  protected readonly series: Map<string, S> = new Map();
  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {}

  /** The series of these label values (created on first use; resolve once, then record through it). */
  with(...values: string[]): S {
    const key = values.join("\u0000");
    let s = this.series.get(key);
    if (!s) {
      s = this.create(values, Object.fromEntries(this.labelNames.map((n, i) => [n, values[i]])));
      this.series.set(key, s);
    }
    return s;
  }

  protected abstract create(values: string[], attrs: Attributes): S;
  abstract write(out: string[]): Promise<void>;
}

export class CounterFamily extends SeriesFamily<CounterSeries> {
  constructor(name: string, help: string, labelNames: readonly string[], private readonly otel: OtelCounter) {
    super(name, help, labelNames);
  }
  protected create(values: string[], attrs: Attributes): CounterSeries {
    return new CounterSeries(values, this.otel, attrs);
  }
  write(out: string[]): Promise<void> {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} counter`);
    for (const s of this.series.values()) {
      out.push(`${this.name}${labelText(this.labelNames, s.values)} ${num(s.value)}`);
    }
    return Promise.resolve();
  }
}

export class HistogramFamily extends SeriesFamily<HistogramSeries> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
    private readonly otel: OtelHistogram,
  ) {
    super(name, help, labelNames);
  }
  protected create(values: string[], attrs: Attributes): HistogramSeries {
    return new HistogramSeries(values, this.bounds, this.otel, attrs);
  }
  write(out: string[]): Promise<void> {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} histogram`);
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.counts[i];
        out.push(
          `${this.name}_bucket${
            labelText(this.labelNames, s.values, `le="${num(this.bounds[i])}"`)
          } ${cumulative}`,
        );
      }
      out.push(`${this.name}_bucket${labelText(this.labelNames, s.values, 'le="+Inf"')} ${s.count}`);
      out.push(`${this.name}_sum${labelText(this.labelNames, s.values)} ${num(s.sum)}`);
      out.push(`${this.name}_count${labelText(this.labelNames, s.values)} ${s.count}`);
    }
    return Promise.resolve();
  }
}

/** Label values and the value of one gauge series. */
export type GaugeReading = [labels: string[], value: number];

/** A gauge read when collected, from callbacks that sources add and remove (a worker's queues, ...). */
export class GaugeFamily implements Family {
  private readonly sources = new Set<() => Promise<GaugeReading[]> | GaugeReading[]>();
  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {}

  /** Adds a source of readings; returns its removal. Readings of equal labels from several sources add up. */
  source(read: () => Promise<GaugeReading[]> | GaugeReading[]): () => void {
    this.sources.add(read);
    return () => this.sources.delete(read);
  }

  /** The current readings, summed per label values. */
  async read(): Promise<Map<string, GaugeReading>> {
    const out = new Map<string, GaugeReading>();
    for (const read of this.sources) {
      let readings: GaugeReading[];
      try {
        readings = await read();
      } catch {
        continue; // a source that cannot be read now (the database is away) is left out
      }
      for (const [labels, value] of readings) {
        const key = labels.join("\u0000");
        const cur = out.get(key);
        if (cur) cur[1] += value;
        else out.set(key, [labels, value]);
      }
    }
    return out;
  }

  async write(out: string[]): Promise<void> {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} gauge`);
    for (const [labels, value] of (await this.read()).values()) {
      out.push(`${this.name}${labelText(this.labelNames, labels)} ${num(value)}`);
    }
  }
}

/** The families of a process, written in the order they were declared. */
export class MetricsRegistry {
  private readonly families: Family[] = [];
  private meter: Meter | null = null;

  /** The OpenTelemetry meter (the global provider's when first needed). */
  private otel(): Meter {
    return this.meter ??= otelMetrics.getMeter("svc");
  }

  counter(name: string, help: string, labelNames: readonly string[]): CounterFamily {
    // OpenTelemetry names a counter without the `_total` that the Prometheus text adds.
    const f = new CounterFamily(
      name,
      help,
      labelNames,
      this.otel().createCounter(name.replace(/_total$/, ""), { description: help }),
    );
    this.families.push(f);
    return f;
  }

  histogram(
    name: string,
    help: string,
    labelNames: readonly string[],
    bounds = DURATION_BUCKETS,
  ): HistogramFamily {
    const f = new HistogramFamily(
      name,
      help,
      labelNames,
      bounds,
      this.otel().createHistogram(name, {
        description: help,
        unit: "s",
        advice: { explicitBucketBoundaries: [...bounds] },
      }),
    );
    this.families.push(f);
    return f;
  }

  gauge(name: string, help: string, labelNames: readonly string[]): GaugeFamily {
    const f = new GaugeFamily(name, help, labelNames);
    const g = this.otel().createObservableGauge(name, { description: help });
    g.addCallback(async (result) => {
      for (const [labels, value] of (await f.read()).values()) {
        result.observe(value, Object.fromEntries(labelNames.map((n, i) => [n, labels[i]])));
      }
    });
    this.families.push(f);
    return f;
  }

  /** Every family in the Prometheus text format (version 0.0.4), ending with a line feed. */
  async text(): Promise<string> {
    const out: string[] = [];
    for (const f of this.families) await f.write(out);
    return out.join("\n") + "\n";
  }
}

/** The content type of the text format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

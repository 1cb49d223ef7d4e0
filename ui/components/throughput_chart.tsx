/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Values per minute as stacked bars in inline SVG (by default completions and failures), drawn at the
 * width the chart actually has (so the labels stay readable on a phone). The same numbers are available
 * as a table under "Show as table" for keyboard and screen-reader users. Other series (a queue's depth)
 * and titles are props, for the per-queue and per-kind charts.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { fmtClock, fmtNum } from "../format.ts";

const HEIGHT = 200;
const PAD = { top: 12, right: 8, bottom: 24, left: 44 };

/** Smallest of 1, 2, 5 × 10^k that is at least `n` (and at least 1). */
export function niceMax(n: number): number {
  if (n <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

function useWidth(ref: { current: HTMLElement | null }, initial: number): number {
  const [width, setWidth] = useState(initial);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setWidth(Math.max(240, Math.floor(el.clientWidth)));
    measure();
    if (typeof ResizeObserver === "undefined") return;
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  return width;
}

/** One stacked series: its key in the points, its label, and its bar and swatch class suffix. */
export interface Series {
  key: string;
  label: string;
  cls: string;
}

/** A minute and a number under each series key (missing keys count as 0). */
export type ChartPoint = { minute: string };

export const THROUGHPUT_SERIES: Series[] = [
  { key: "completed", label: "Completed", cls: "completed" },
  { key: "failed", label: "Failed", cls: "failed" },
];

const val = (p: ChartPoint, key: string) => Number((p as Record<string, unknown>)[key] ?? 0) || 0;

export function ThroughputChart(
  {
    points,
    title = "Throughput, last 60 minutes",
    testid = "throughput",
    series = THROUGHPUT_SERIES,
    legend = "sum",
    empty = "No completions or failures in this window",
    children,
  }: {
    points: ChartPoint[];
    title?: string;
    /** Prefix of the test ids: `<testid>-chart`, `<testid>-<key>-total`. */
    testid?: string;
    series?: Series[];
    /** What the legend shows for each series: the window's sum, or the last minute's value (a depth). */
    legend?: "sum" | "last";
    empty?: string;
    /** Shown in the card's head after the title (a select of the queue or kind). */
    children?: ComponentChildren;
  },
) {
  const box = useRef<HTMLDivElement>(null);
  const width = useWidth(box, 720);
  const n = Math.max(points.length, 1);
  const plotW = width - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const stack = (p: ChartPoint) => series.reduce((s, x) => s + val(p, x.key), 0);
  const top = niceMax(Math.max(0, ...points.map(stack)));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const band = plotW / n;
  const barW = Math.max(1, band * 0.72);
  // "last": the latest minute that has a value (a minute without a sample has null there).
  const latest = (key: string) => {
    const p = points.findLast((p) => (p as Record<string, unknown>)[key] != null);
    return p ? val(p, key) : 0;
  };
  const totals = series.map((x) =>
    legend === "last" ? latest(x.key) : points.reduce((s, p) => s + val(p, x.key), 0)
  );
  const any = points.some((p) => stack(p) > 0);
  const titleId = `${testid}-title`;
  const ticks = top >= 2 && top % 2 === 0 ? [0, top / 2, top] : [0, top];
  const labelIdx = points.length > 2
    ? [0, Math.floor((points.length - 1) / 2), points.length - 1]
    : points.map((_, i) => i);

  return (
    <section class="card chart-card" aria-labelledby={titleId} data-testid={`${testid}-card`}>
      <div class="card-head">
        <h2 id={titleId}>{title}</h2>
        {children}
        <p class="legend">
          {series.map((x, i) => (
            <span key={x.key}>
              <span class={`swatch swatch-${x.cls}`} aria-hidden="true" /> {x.label}
              {legend === "last" ? " (latest sample)" : ""}{" "}
              <strong data-testid={`${testid}-${x.key}-total`}>{fmtNum(totals[i])}</strong>
            </span>
          ))}
        </p>
      </div>
      <div class="chart-box" ref={box}>
        <svg
          data-testid={`${testid}-chart`}
          class="chart"
          width={width}
          height={HEIGHT}
          viewBox={`0 0 ${width} ${HEIGHT}`}
          role="img"
          aria-label={`${title}: ${
            series.map((x, i) => `${totals[i]} ${x.label.toLowerCase()}`).join(", ")
          } (${legend === "last" ? "now" : `in the last ${points.length} minutes`})`}
        >
          {ticks.map((t) => (
            <g key={`t${t}`}>
              <line class="grid" x1={PAD.left} x2={width - PAD.right} y1={y(t)} y2={y(t)} />
              <text class="axis" x={PAD.left - 6} y={y(t) + 4} text-anchor="end">{fmtNum(t)}</text>
            </g>
          ))}
          {points.map((p, i) => {
            const x = PAD.left + i * band + (band - barW) / 2;
            let base = PAD.top + plotH;
            return (
              <g key={p.minute} class="bar">
                <title>
                  {`${fmtClock(p.minute)}: ${
                    series.map((s) => `${val(p, s.key)} ${s.label.toLowerCase()}`).join(", ")
                  }`}
                </title>
                <rect class="hit" x={PAD.left + i * band} y={PAD.top} width={band} height={plotH} />
                {series.map((s) => {
                  const h = (val(p, s.key) / top) * plotH;
                  if (h <= 0) return null;
                  base -= h;
                  return <rect key={s.key} class={`bar-${s.cls}`} x={x} y={base} width={barW} height={h} />;
                })}
              </g>
            );
          })}
          {labelIdx.map((i, k) => (
            <text
              key={`x${i}`}
              class="axis"
              x={PAD.left + i * band + band / 2}
              y={HEIGHT - 6}
              text-anchor={k === 0 && labelIdx.length > 1
                ? "start"
                : k === labelIdx.length - 1 && labelIdx.length > 1
                ? "end"
                : "middle"}
            >
              {fmtClock(points[i].minute)}
            </text>
          ))}
          {!any && (
            <text class="chart-empty" x={PAD.left + plotW / 2} y={PAD.top + plotH / 2} text-anchor="middle">
              {empty}
            </text>
          )}
        </svg>
      </div>
      <details class="chart-table">
        <summary>Show as table</summary>
        <div class="table-wrap" role="region" aria-label={`${title}, per minute`} tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Minute</th>
                {series.map((s) => <th key={s.key} scope="col" class="num">{s.label}</th>)}
              </tr>
            </thead>
            <tbody>
              {points.filter((p) => stack(p) > 0).map((p) => (
                <tr key={p.minute}>
                  <td>{fmtClock(p.minute)}</td>
                  {series.map((s) => <td key={s.key} class="num">{fmtNum(val(p, s.key))}</td>)}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </section>
  );
}

/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Completions and failures per minute as stacked bars in inline SVG, drawn at the width the
 * chart actually has (so the labels stay readable on a phone). The same numbers are available
 * as a table under "Show as table" for keyboard and screen-reader users.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { ThroughputPoint } from "../api.ts";
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

export function ThroughputChart({ points }: { points: ThroughputPoint[] }) {
  const box = useRef<HTMLDivElement>(null);
  const width = useWidth(box, 720);
  const n = Math.max(points.length, 1);
  const plotW = width - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const top = niceMax(Math.max(0, ...points.map((p) => p.completed + p.failed)));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const band = plotW / n;
  const barW = Math.max(1, band * 0.72);
  const totalCompleted = points.reduce((s, p) => s + p.completed, 0);
  const totalFailed = points.reduce((s, p) => s + p.failed, 0);
  const ticks = top >= 2 && top % 2 === 0 ? [0, top / 2, top] : [0, top];
  const labelIdx = points.length > 2
    ? [0, Math.floor((points.length - 1) / 2), points.length - 1]
    : points.map((_, i) => i);

  return (
    <section class="card chart-card" aria-labelledby="throughput-title">
      <div class="card-head">
        <h2 id="throughput-title">Throughput, last 60 minutes</h2>
        <p class="legend">
          <span class="swatch swatch-completed" aria-hidden="true" /> Completed{" "}
          <strong data-testid="throughput-completed-total">{fmtNum(totalCompleted)}</strong>
          <span class="swatch swatch-failed" aria-hidden="true" /> Failed{" "}
          <strong data-testid="throughput-failed-total">{fmtNum(totalFailed)}</strong>
        </p>
      </div>
      <div class="chart-box" ref={box}>
        <svg
          data-testid="throughput-chart"
          class="chart"
          width={width}
          height={HEIGHT}
          viewBox={`0 0 ${width} ${HEIGHT}`}
          role="img"
          aria-label={`Completions and failures per minute: ${totalCompleted} completed and ${totalFailed} failed in the last ${points.length} minutes`}
        >
          {ticks.map((t) => (
            <g key={`t${t}`}>
              <line class="grid" x1={PAD.left} x2={width - PAD.right} y1={y(t)} y2={y(t)} />
              <text class="axis" x={PAD.left - 6} y={y(t) + 4} text-anchor="end">{fmtNum(t)}</text>
            </g>
          ))}
          {points.map((p, i) => {
            const x = PAD.left + i * band + (band - barW) / 2;
            const hc = (p.completed / top) * plotH;
            const hf = (p.failed / top) * plotH;
            const base = PAD.top + plotH;
            return (
              <g key={p.minute} class="bar">
                <title>{`${fmtClock(p.minute)}: ${p.completed} completed, ${p.failed} failed`}</title>
                <rect class="hit" x={PAD.left + i * band} y={PAD.top} width={band} height={plotH} />
                {p.completed > 0 && (
                  <rect class="bar-completed" x={x} y={base - hc} width={barW} height={hc} />
                )}
                {p.failed > 0 && (
                  <rect class="bar-failed" x={x} y={base - hc - hf} width={barW} height={hf} />
                )}
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
          {totalCompleted + totalFailed === 0 && (
            <text class="chart-empty" x={PAD.left + plotW / 2} y={PAD.top + plotH / 2} text-anchor="middle">
              No completions or failures in this window
            </text>
          )}
        </svg>
      </div>
      <details class="chart-table">
        <summary>Show as table</summary>
        <div class="table-wrap" role="region" aria-label="Throughput per minute" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Minute</th>
                <th scope="col" class="num">Completed</th>
                <th scope="col" class="num">Failed</th>
              </tr>
            </thead>
            <tbody>
              {points.filter((p) => p.completed + p.failed > 0).map((p) => (
                <tr key={p.minute}>
                  <td>{fmtClock(p.minute)}</td>
                  <td class="num">{fmtNum(p.completed)}</td>
                  <td class="num">{fmtNum(p.failed)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </section>
  );
}

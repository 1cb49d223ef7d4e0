/** @jsxImportSource preact */
import { fmtDateTime, fmtRelative, fmtUtc } from "../format.ts";

/** A time shown relative ("3 min ago"), with the local time (and its offset) and UTC on hover. */
export function RelTime({ iso, testid }: { iso: string | null | undefined; testid?: string }) {
  if (!iso) return <span class="muted" data-testid={testid}>–</span>;
  return (
    <time dateTime={iso} title={`${fmtDateTime(iso)}\n${fmtUtc(iso)}`} data-testid={testid}>
      {fmtRelative(iso)}
    </time>
  );
}

/** A time shown as local date and time with the offset, then the relative form; UTC on hover. */
export function FullTime({ iso, testid }: { iso: string | null | undefined; testid?: string }) {
  if (!iso) return <span class="muted" data-testid={testid}>–</span>;
  return (
    <time dateTime={iso} title={fmtUtc(iso)} data-testid={testid}>
      {fmtDateTime(iso)} <span class="muted">({fmtRelative(iso)})</span>
    </time>
  );
}

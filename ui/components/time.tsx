/** @jsxImportSource preact */
import { fmtDateTime, fmtRelative } from "../format.ts";

/** A time shown relative ("3 min ago"), with the local date and time on hover. */
export function RelTime({ iso, testid }: { iso: string | null | undefined; testid?: string }) {
  if (!iso) return <span class="muted" data-testid={testid}>–</span>;
  return (
    <time dateTime={iso} title={fmtDateTime(iso)} data-testid={testid}>
      {fmtRelative(iso)}
    </time>
  );
}

/** A time shown as local date and time, followed by the relative form. */
export function FullTime({ iso, testid }: { iso: string | null | undefined; testid?: string }) {
  if (!iso) return <span class="muted" data-testid={testid}>–</span>;
  return (
    <time dateTime={iso} title={iso} data-testid={testid}>
      {fmtDateTime(iso)} <span class="muted">({fmtRelative(iso)})</span>
    </time>
  );
}

/** @jsxImportSource preact */
import { jsonPretty } from "../format.ts";

/** Pretty-printed JSON in a scrollable block. */
export function JsonBlock({ value, testid, label }: { value: unknown; testid?: string; label: string }) {
  return (
    <pre class="json" data-testid={testid} aria-label={label} tabIndex={0}>
      {jsonPretty(value)}
    </pre>
  );
}

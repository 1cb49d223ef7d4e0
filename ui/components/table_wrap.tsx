/** @jsxImportSource preact */
import type { ComponentChildren } from "preact";

/**
 * A horizontally scrollable box for a wide table (phones). It can take focus so that keyboard
 * users can scroll it with the arrow keys.
 */
export function TableWrap(
  { label, children, testid }: { label: string; children: ComponentChildren; testid?: string },
) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0} data-testid={testid}>
      {children}
    </div>
  );
}

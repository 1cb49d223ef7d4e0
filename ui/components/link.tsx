/** @jsxImportSource preact */
/// <reference lib="dom" />
import type { ComponentChildren, TargetedMouseEvent } from "preact";
import { navigate } from "../router.ts";

interface Props {
  href: string;
  children?: ComponentChildren;
  class?: string;
  title?: string;
  "data-testid"?: string;
  "aria-label"?: string;
  "aria-current"?: "page" | "step" | "true" | undefined;
}

/** A real <a>: plain clicks route in-app, modified clicks (new tab, ...) stay with the browser. */
export function Link({ href, children, ...rest }: Props) {
  const handle = (e: TargetedMouseEvent<HTMLAnchorElement>) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={handle} {...rest}>
      {children}
    </a>
  );
}

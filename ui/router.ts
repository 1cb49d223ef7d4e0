/// <reference lib="dom" />
/**
 * A tiny history-based router: the URL path picks the page, the query string holds a page's
 * state (filters, cursor), so every view can be bookmarked and the back button works.
 * `svc serve` answers `index.html` for any GET outside `/api/` that is not a file.
 */
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();

function notify(): void {
  for (const l of listeners) l();
}

globalThis.addEventListener?.("popstate", notify);

/** Goes to `to` (a path with an optional query) without reloading the page. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const current = location.pathname + location.search;
  if (to === current) return;
  if (opts.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  notify();
  if (!opts.replace) globalThis.scrollTo?.(0, 0);
}

export interface Location {
  path: string;
  query: URLSearchParams;
  /** path + query, as in an href. */
  href: string;
}

function read(): Location {
  return {
    path: location.pathname,
    query: new URLSearchParams(location.search),
    href: location.pathname + location.search,
  };
}

/** The current location; re-renders the caller when it changes. */
export function useLocation(): Location {
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const update = () => setLoc(read());
    listeners.add(update);
    update();
    return () => {
      listeners.delete(update);
    };
  }, []);
  return loc;
}

export type Route =
  | { page: "dashboard" }
  | { page: "jobs" }
  | { page: "job"; id: string }
  | { page: "queues" }
  | { page: "cron" }
  | { page: "runtimes" }
  | { page: "running" }
  | { page: "kinds" }
  | { page: "not_found" };

/** Maps a path to a page. Trailing slashes are ignored. */
export function matchRoute(path: string): Route {
  const p = path.length > 1 ? path.replace(/\/+$/, "") : path;
  if (p === "/" || p === "") return { page: "dashboard" };
  if (p === "/jobs") return { page: "jobs" };
  const job = /^\/jobs\/(\d+)$/.exec(p);
  if (job) return { page: "job", id: job[1] };
  if (p === "/queues") return { page: "queues" };
  if (p === "/cron") return { page: "cron" };
  if (p === "/runtimes") return { page: "runtimes" };
  if (p === "/running") return { page: "running" };
  if (p === "/kinds") return { page: "kinds" };
  return { page: "not_found" };
}

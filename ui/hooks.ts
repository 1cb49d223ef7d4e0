/// <reference lib="dom" />
/** Data hooks: polling a page's data, and running a mutation with its error shown in the banner. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { type ApiError, toApiError } from "./api.ts";
import { useApp } from "./state.ts";

/** How often a page's data is fetched again while the tab is visible. */
export const POLL_INTERVAL_MS = 2000;

export interface Polled<T> {
  /** The latest data; kept from the previous key until the new key's data arrives. */
  data: T | undefined;
  /** True once `data` belongs to the current key. */
  current: boolean;
  error: ApiError | null;
  /** Fetches again now (after a mutation, say). */
  refresh(): void;
}

function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}

/**
 * Fetches `fetcher` now and again `POLL_INTERVAL_MS` after each answer, pausing while
 * `document.hidden` and fetching at once when the tab is shown again. A new `key` (the
 * fetch's inputs, as a string) restarts it. Errors go to the banner under `poll:<key>`
 * and are cleared by the next success.
 */
export function usePoll<T>(key: string, fetcher: (signal: AbortSignal) => Promise<T>): Polled<T> {
  const { reportError } = useApp();
  const [state, setState] = useState<{ key: string; data: T | undefined; error: ApiError | null }>({
    key: "",
    data: undefined,
    error: null,
  });
  const [tick, setTick] = useState(0);
  const fetcherRef = useRef(fetcher);
  fetcherRef.current = fetcher;
  const source = `poll:${key.split("?")[0]}`;

  useEffect(() => {
    let stopped = false;
    let inFlight = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let ctrl: AbortController | undefined;

    const schedule = () => {
      clearTimeout(timer);
      timer = undefined;
      if (!stopped && !document.hidden) timer = setTimeout(run, POLL_INTERVAL_MS);
    };
    const run = async () => {
      if (stopped || inFlight) return;
      inFlight = true;
      ctrl = new AbortController();
      try {
        const data = await fetcherRef.current(ctrl.signal);
        if (stopped) return;
        setState({ key, data, error: null });
        reportError(source, null);
      } catch (err) {
        if (stopped || isAbort(err)) return;
        const e = toApiError(err);
        setState((s) => ({ key, data: s.data, error: e }));
        reportError(source, e);
      } finally {
        inFlight = false;
      }
      schedule();
    };
    const onVisibility = () => {
      if (document.hidden) {
        clearTimeout(timer);
        timer = undefined;
      } else if (!inFlight) {
        clearTimeout(timer);
        run();
      }
    };
    document.addEventListener("visibilitychange", onVisibility);
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
      ctrl?.abort();
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, [key, tick]);

  // Leaving the page takes its load error out of the banner.
  useEffect(() => () => reportError(source, null), [source]);

  const refresh = useCallback(() => setTick((t) => t + 1), []);
  return { data: state.data, current: state.key === key, error: state.error, refresh };
}

/**
 * Runs mutations one at a time: `busy` names the running one (to disable its button while the
 * request is out), failures go to the banner under `action`, success clears it.
 */
export function useAction(): {
  busy: string | null;
  run<T>(name: string, fn: () => Promise<T>, onDone?: (value: T) => void): Promise<void>;
} {
  const { reportError } = useApp();
  const [busy, setBusy] = useState<string | null>(null);
  const run = useCallback(async <T>(name: string, fn: () => Promise<T>, onDone?: (value: T) => void) => {
    setBusy(name);
    try {
      const value = await fn();
      reportError("action", null);
      onDone?.(value);
    } catch (err) {
      reportError("action", toApiError(err));
    } finally {
      setBusy(null);
    }
  }, [reportError]);
  return { busy, run };
}

/** Sets the tab title for the current page. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = title ? `${title} · svc` : "svc";
  }, [title]);
}

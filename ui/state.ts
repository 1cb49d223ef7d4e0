/**
 * What every page shares: the server's capabilities (read-only or not), the error banner and the
 * notice line. Provided by `App`, read with `useApp()`.
 */
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ApiError, Capabilities } from "./api.ts";

export interface AppState {
  caps: Capabilities;
  /** True when the server is read-only: pages then render no mutation control at all. */
  readOnly: boolean;
  /** Shows `err` in the banner under `source` (null clears that source). */
  reportError(source: string, err: ApiError | null): void;
  /** Shows a short success message. */
  notify(message: string): void;
}

export const AppContext = createContext<AppState | null>(null);

export function useApp(): AppState {
  const app = useContext(AppContext);
  if (!app) throw new Error("useApp() outside <AppContext.Provider>");
  return app;
}

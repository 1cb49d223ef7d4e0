/** @jsxImportSource preact */
/**
 * The admin UI: fetches `/api/capabilities` first (read-only or not decides which controls
 * exist at all), then renders the page the URL names, or the login form when the server has a
 * token and this browser no session (also after any 401 `unauthorized`).
 */
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, type ApiError, type Capabilities, toApiError } from "./api.ts";
import { Layout } from "./components/layout.tsx";
import { Cron } from "./pages/cron.tsx";
import { Dashboard } from "./pages/dashboard.tsx";
import { JobDetail } from "./pages/job_detail.tsx";
import { Login } from "./pages/login.tsx";
import { Jobs } from "./pages/jobs.tsx";
import { NotFound } from "./pages/not_found.tsx";
import { Queues } from "./pages/queues.tsx";
import { Runtimes } from "./pages/runtimes.tsx";
import { Running } from "./pages/running.tsx";
import { Kinds } from "./pages/kinds.tsx";
import { matchRoute, type Route, useLocation } from "./router.ts";
import { AppContext, type AppState } from "./state.ts";

const NOTICE_MS = 6000;
const CAPS_RETRY_MS = 2000;

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case "dashboard":
      return <Dashboard />;
    case "jobs":
      return <Jobs />;
    case "job":
      return <JobDetail id={route.id} key={route.id} />;
    case "queues":
      return <Queues />;
    case "cron":
      return <Cron />;
    case "runtimes":
      return <Runtimes />;
    case "running":
      return <Running />;
    case "kinds":
      return <Kinds />;
    default:
      return <NotFound />;
  }
}

export function App() {
  const loc = useLocation();
  const route = matchRoute(loc.path);
  const [caps, setCaps] = useState<Capabilities | null>(null);
  /** Bumped to load the capabilities again (after logging in or out). */
  const [capsLoad, setCapsLoad] = useState(0);
  const [loginNeeded, setLoginNeeded] = useState(false);
  const [errors, setErrors] = useState<Map<string, ApiError>>(() => new Map());
  const [notice, setNotice] = useState<string | null>(null);
  const noticeTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);

  const reportError = useCallback((source: string, err: ApiError | null) => {
    if (err?.code === "unauthorized") {
      setLoginNeeded(true); // the session ended (logged out elsewhere, or another token)
      return;
    }
    setErrors((prev) => {
      if (err === null && !prev.has(source)) return prev;
      const next = new Map(prev);
      if (err === null) next.delete(source);
      else next.set(source, err);
      return next;
    });
  }, []);

  const notify = useCallback((message: string) => {
    setNotice(message);
    clearTimeout(noticeTimer.current);
    noticeTimer.current = setTimeout(() => setNotice(null), NOTICE_MS);
  }, []);

  // Capabilities come first; until they are known no page (and so no control) is rendered.
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const c = await api.capabilities();
        if (stopped) return;
        setCaps(c);
        setLoginNeeded(c.auth_required === true && c.authenticated !== true);
        reportError("capabilities", null);
      } catch (err) {
        if (stopped) return;
        reportError("capabilities", toApiError(err));
        timer = setTimeout(load, CAPS_RETRY_MS);
      }
    };
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [capsLoad]);

  const loggedIn = useCallback(() => {
    setErrors(new Map());
    setCapsLoad((n) => n + 1);
  }, []);
  const logout = useCallback(async () => {
    try {
      await api.logout();
    } catch { /* the session ends anyway: the login form asks again */ }
    setLoginNeeded(true);
    setCapsLoad((n) => n + 1);
  }, []);

  const state = useMemo<AppState | null>(
    () => caps && { caps, readOnly: caps.read_only === true, reportError, notify },
    [caps, reportError, notify],
  );

  return (
    <Layout
      route={route}
      caps={caps}
      errors={[...errors.values()]}
      onDismissErrors={() => setErrors(new Map())}
      notice={notice}
      onLogout={caps?.auth_required && !loginNeeded ? logout : undefined}
      bare={loginNeeded}
    >
      {loginNeeded ? <Login onLoggedIn={loggedIn} /> : state
        ? (
          <AppContext.Provider value={state}>
            <Page route={route} />
          </AppContext.Provider>
        )
        : <p class="loading" data-testid="app-loading">Connecting to the admin API…</p>}
    </Layout>
  );
}

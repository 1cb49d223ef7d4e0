/** @jsxImportSource preact */
import type { ComponentChildren } from "preact";
import { FindJob } from "./find_job.tsx";
import type { ApiError, Capabilities } from "../api.ts";
import type { Route } from "../router.ts";
import { ErrorBanner } from "./error_banner.tsx";
import { Link } from "./link.tsx";

const NAV: { page: Route["page"]; href: string; label: string; testid: string }[] = [
  { page: "dashboard", href: "/", label: "Dashboard", testid: "nav-dashboard" },
  { page: "running", href: "/running", label: "Running", testid: "nav-running" },
  { page: "jobs", href: "/jobs", label: "Jobs", testid: "nav-jobs" },
  { page: "queues", href: "/queues", label: "Queues", testid: "nav-queues" },
  { page: "kinds", href: "/kinds", label: "Kinds", testid: "nav-kinds" },
  { page: "cron", href: "/cron", label: "Cron", testid: "nav-cron" },
  { page: "runtimes", href: "/runtimes", label: "Runtimes", testid: "nav-runtimes" },
];

export function Layout(props: {
  route: Route;
  caps: Capabilities | null;
  errors: ApiError[];
  onDismissErrors: () => void;
  notice: string | null;
  /** Shown as a Log out button when the server has a token and this browser a session. */
  onLogout?: () => void;
  /** The login form: no navigation and no job lookup before a session exists. */
  bare?: boolean;
  children: ComponentChildren;
}) {
  const { route, caps } = props;
  const active = route.page === "job" ? "jobs" : route.page;
  return (
    <div class="shell">
      <a class="skip-link" href="#main">Skip to content</a>
      <header class="topbar">
        <div class="topbar-inner">
          <Link href="/" class="brand" data-testid="brand">
            svc
          </Link>
          {!props.bare && (
            <nav aria-label="Main" class="nav">
              <ul>
                {NAV.map((n) => (
                  <li key={n.page}>
                    <Link
                      href={n.href}
                      data-testid={n.testid}
                      aria-current={n.page === active ? "page" : undefined}
                    >
                      {n.label}
                    </Link>
                  </li>
                ))}
              </ul>
            </nav>
          )}
          <div class="topbar-meta">
            {caps && !props.bare && <FindJob />}
            {caps?.read_only && (
              <span
                class="badge badge-readonly"
                data-testid="read-only-badge"
                title="This server is read-only: no changes can be made here"
              >
                read-only
              </span>
            )}
            {caps && <span class="muted version" data-testid="app-version">v{caps.version}</span>}
            {props.onLogout && (
              <button
                type="button"
                class="btn btn-small btn-ghost"
                data-testid="logout-button"
                onClick={props.onLogout}
              >
                Log out
              </button>
            )}
          </div>
        </div>
      </header>
      <div class="messages" aria-live="polite">
        <ErrorBanner errors={props.errors} onDismiss={props.onDismissErrors} />
        {props.notice && (
          <div class="banner banner-notice" role="status" data-testid="notice">
            {props.notice}
          </div>
        )}
      </div>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </div>
  );
}

/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Jobs list: filters (state, kind, queue, tag), text search in args, keyset pagination. The
 * filters live in the URL query string; bulk retry appears when the list is filtered to
 * `state=failed` (and the server is writable).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, JOB_STATES, type JobFilter, type JobState } from "../api.ts";
import { Link } from "../components/link.tsx";
import { StateBadge } from "../components/state_badge.tsx";
import { TableWrap } from "../components/table_wrap.tsx";
import { RelTime } from "../components/time.tsx";
import { fmtNum, jsonPreview, stateLabel } from "../format.ts";
import { useAction, usePoll, useTitle } from "../hooks.ts";
import { navigate, useLocation } from "../router.ts";
import { useApp } from "../state.ts";

const FILTER_KEYS = ["state", "kind", "queue", "tag", "q"] as const;
type FilterKey = typeof FILTER_KEYS[number];
const TYPING_DELAY_MS = 400;

function readFilter(query: URLSearchParams): JobFilter {
  const f: JobFilter = {};
  const state = query.get("state") ?? "";
  if ((JOB_STATES as readonly string[]).includes(state)) f.state = state as JobState;
  for (const k of ["kind", "queue", "tag", "q", "cursor"] as const) {
    const v = query.get(k);
    if (v) f[k] = v;
  }
  const limit = Number(query.get("limit"));
  if (Number.isInteger(limit) && limit > 0) f.limit = limit;
  return f;
}

/** `/jobs?...` for a filter; cursor and limit are kept only when given. */
export function jobsHref(f: JobFilter): string {
  const p = new URLSearchParams();
  for (const k of [...FILTER_KEYS, "limit", "cursor"] as const) {
    const v = f[k];
    if (v !== undefined && v !== "") p.set(k, String(v));
  }
  const s = p.toString();
  return s ? `/jobs?${s}` : "/jobs";
}

/** Distinct values for the kind and queue selects (fetched once per visit, not polled). */
function useChoices(): { kinds: string[]; queues: string[] } {
  const [choices, setChoices] = useState<{ kinds: string[]; queues: string[] }>({ kinds: [], queues: [] });
  useEffect(() => {
    const ctrl = new AbortController();
    Promise.all([api.kinds(ctrl.signal), api.queues(ctrl.signal)])
      .then(([k, q]) =>
        setChoices({
          kinds: k.kinds.map((x) => x.kind).sort(),
          queues: q.queues.map((x) => x.name).sort(),
        })
      )
      .catch(() => {/* the selects still offer the current value; the list poll reports errors */});
    return () => ctrl.abort();
  }, []);
  return choices;
}

function withCurrent(values: string[], current: string | undefined): string[] {
  return current && !values.includes(current) ? [...values, current] : values;
}

export function Jobs() {
  useTitle("Jobs");
  const { readOnly, notify } = useApp();
  const loc = useLocation();
  const filter = readFilter(loc.query);
  const key = `jobs${jobsHref(filter).slice("/jobs".length)}`;
  const page = usePoll(key, (signal) => api.jobs(filter, signal));
  const choices = useChoices();
  const action = useAction();
  const [confirming, setConfirming] = useState(false);

  // Text fields: typed locally, applied after a pause or on Enter.
  const [tag, setTag] = useState(filter.tag ?? "");
  const [q, setQ] = useState(filter.q ?? "");
  const typing = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => {
    // Keep what is being typed (a trailing space, say) when the URL already matches it.
    setTag((prev) => (prev.trim() === (filter.tag ?? "") ? prev : filter.tag ?? ""));
    setQ((prev) => (prev.trim() === (filter.q ?? "") ? prev : filter.q ?? ""));
  }, [filter.tag, filter.q]);
  useEffect(() => setConfirming(false), [key]);

  const apply = (changes: Partial<Record<FilterKey, string>>, replace = false) => {
    clearTimeout(typing.current);
    const next: JobFilter = { ...filter, ...changes, cursor: undefined } as JobFilter;
    navigate(jobsHref(next), { replace });
  };
  const typed = (changes: Partial<Record<FilterKey, string>>) => {
    clearTimeout(typing.current);
    typing.current = setTimeout(() => apply(changes, true), TYPING_DELAY_MS);
  };
  const onSubmit = (e: Event) => {
    e.preventDefault();
    apply({ tag: tag.trim(), q: q.trim() });
  };
  const anyFilter = FILTER_KEYS.some((k) => filter[k]);

  const jobs = page.data?.jobs ?? [];
  const nextCursor = page.data?.next_cursor ?? null;
  const showErrors = jobs.some((j) => j.errors.length > 0);
  const bulkPossible = !readOnly && filter.state === "failed";
  const bulkBlocked = bulkPossible && Boolean(filter.tag || filter.q);

  const bulkRetry = () =>
    action.run(
      "bulk-retry",
      () => api.bulkRetry({ state: "failed", kind: filter.kind, queue: filter.queue }),
      (r) => {
        setConfirming(false);
        notify(`Retried ${fmtNum(r.count)} failed job${r.count === 1 ? "" : "s"}.`);
        page.refresh();
      },
    );

  return (
    <div class="page" data-testid="page-jobs">
      <h1>Jobs</h1>
      <form class="filters" onSubmit={onSubmit} role="search" aria-label="Filter jobs">
        <label>
          <span>State</span>
          <select
            data-testid="filter-state"
            value={filter.state ?? ""}
            onChange={(e) => apply({ state: (e.currentTarget as HTMLSelectElement).value })}
          >
            <option value="">All states</option>
            {JOB_STATES.map((s) => <option key={s} value={s}>{stateLabel(s)}</option>)}
          </select>
        </label>
        <label>
          <span>Kind</span>
          <select
            data-testid="filter-kind"
            value={filter.kind ?? ""}
            onChange={(e) => apply({ kind: (e.currentTarget as HTMLSelectElement).value })}
          >
            <option value="">All kinds</option>
            {withCurrent(choices.kinds, filter.kind).map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        </label>
        <label>
          <span>Queue</span>
          <select
            data-testid="filter-queue"
            value={filter.queue ?? ""}
            onChange={(e) => apply({ queue: (e.currentTarget as HTMLSelectElement).value })}
          >
            <option value="">All queues</option>
            {withCurrent(choices.queues, filter.queue).map((n) => <option key={n} value={n}>{n}</option>)}
          </select>
        </label>
        <label>
          <span>Tag</span>
          <input
            type="text"
            data-testid="filter-tag"
            value={tag}
            placeholder="any tag"
            autocomplete="off"
            onInput={(e) => {
              const v = (e.currentTarget as HTMLInputElement).value;
              setTag(v);
              typed({ tag: v.trim() });
            }}
          />
        </label>
        <label class="filter-search">
          <span>Search args</span>
          <input
            type="search"
            data-testid="search-input"
            value={q}
            placeholder="text in args"
            autocomplete="off"
            onInput={(e) => {
              const v = (e.currentTarget as HTMLInputElement).value;
              setQ(v);
              typed({ q: v.trim() });
            }}
          />
        </label>
        <div class="filter-buttons">
          <button type="submit" class="btn" data-testid="filters-apply">Apply</button>
          {anyFilter && <Link href="/jobs" class="btn btn-ghost" data-testid="filters-clear">Clear</Link>}
        </div>
      </form>

      {bulkPossible && (
        <div class="bulk-bar" data-testid="bulk-bar">
          {bulkBlocked
            ? (
              <p class="muted" data-testid="bulk-retry-unavailable">
                Bulk retry filters by state, kind and queue only: clear the tag and search fields to retry
                every failed job that matches.
              </p>
            )
            : confirming
            ? (
              <>
                <p>
                  Retry <strong>every</strong> failed job{filter.kind
                    ? (
                      <>
                        of kind <code>{filter.kind}</code>
                      </>
                    )
                    : null}
                  {filter.queue
                    ? (
                      <>
                        in queue <code>{filter.queue}</code>
                      </>
                    )
                    : null}, not only this page?
                </p>
                <button
                  type="button"
                  class="btn btn-primary"
                  data-testid="bulk-retry-confirm"
                  disabled={action.busy !== null}
                  onClick={bulkRetry}
                >
                  Yes, retry them
                </button>
                <button
                  type="button"
                  class="btn btn-ghost"
                  data-testid="bulk-retry-cancel"
                  onClick={() => setConfirming(false)}
                >
                  Keep them
                </button>
              </>
            )
            : (
              <button
                type="button"
                class="btn"
                data-testid="bulk-retry-button"
                onClick={() => setConfirming(true)}
              >
                Retry all failed jobs matching these filters…
              </button>
            )}
        </div>
      )}

      <div class="list-meta">
        <span data-testid="jobs-count" aria-live="polite">
          {page.data
            ? `${jobs.length} job${jobs.length === 1 ? "" : "s"} on this page${
              filter.cursor ? " (a later page)" : ""
            }`
            : "Loading…"}
        </span>
      </div>

      <TableWrap label="Jobs" testid="jobs-table">
        <table class={page.current ? "" : "stale"} aria-busy={!page.current}>
          <thead>
            <tr>
              <th scope="col" class="num">ID</th>
              <th scope="col">State</th>
              <th scope="col">Kind</th>
              <th scope="col">Queue</th>
              <th scope="col" class="num">Attempt</th>
              <th scope="col">Args</th>
              <th scope="col">Tags</th>
              {showErrors && <th scope="col">Last error</th>}
              <th scope="col">Created</th>
              <th scope="col">Run at</th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => (
              <tr key={j.id} data-testid={`job-row-${j.id}`} data-state={j.state}>
                <td class="num">
                  <Link href={`/jobs/${j.id}`} data-testid={`job-link-${j.id}`} aria-label={`Job ${j.id}`}>
                    #{j.id}
                  </Link>
                </td>
                <td>
                  <StateBadge state={j.state} />
                </td>
                <td>
                  <code>{j.kind}</code>
                </td>
                <td>{j.queue}</td>
                <td class="num">{j.attempt}/{j.effective_max_attempts ?? j.max_attempts}</td>
                <td class="cell-args">
                  <code title={jsonPreview(j.args, 2000)}>{jsonPreview(j.args, 60)}</code>
                </td>
                <td>
                  {j.tags.map((t) => <span class="tag" key={t}>{t}</span>)}
                </td>
                {showErrors && (
                  <td class="cell-error" title={j.errors.at(-1)?.error}>
                    {j.errors.at(-1)?.error ?? ""}
                  </td>
                )}
                <td>
                  <RelTime iso={j.created_at} />
                </td>
                <td>
                  <RelTime iso={j.run_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
      {page.data && jobs.length === 0 && (
        <p class="empty" data-testid="jobs-empty">
          {filter.cursor ? "No more jobs." : anyFilter ? "No jobs match these filters." : "No jobs yet."}
        </p>
      )}

      <nav class="pager" aria-label="Pages">
        {filter.cursor && (
          <Link href={jobsHref({ ...filter, cursor: undefined })} class="btn" data-testid="first-page">
            « First page
          </Link>
        )}
        {nextCursor && (
          <Link href={jobsHref({ ...filter, cursor: nextCursor })} class="btn" data-testid="next-page">
            Next page »
          </Link>
        )}
      </nav>
    </div>
  );
}

/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Jobs list: filters (state, kind, queue, tag), text search in args, keyset pagination. The
 * filters live in the URL query string. When the server is writable: an enqueue form, each row's own
 * actions (retry, cancel, delete), a selection of rows with those actions applied to the selected jobs,
 * and (once the list is filtered by state, kind or queue) bulk retry or cancel of every job the filter
 * matches. The form, the table, the selection, the bulk bar and the enqueue form are in `jobs/`.
 */
import { useEffect } from "preact/hooks";
import { api, JOB_STATES, type JobFilter, type JobState } from "../api.ts";
import { Link } from "../components/link.tsx";
import { usePoll, useTitle } from "../hooks.ts";
import { navigate, useLocation } from "../router.ts";
import { useApp } from "../state.ts";
import { BulkBar } from "./jobs/bulk.tsx";
import { EnqueuePanel } from "./jobs/enqueue.tsx";
import { FILTER_KEYS, type FilterKey, JobFilters } from "./jobs/filters.tsx";
import { JobsTable } from "./jobs/table.tsx";
import { RowActions, SelectionBar, useSelection } from "./jobs/selection.tsx";

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

export function Jobs() {
  useTitle("Jobs");
  const { readOnly } = useApp();
  const loc = useLocation();
  const filter = readFilter(loc.query);
  const key = `jobs${jobsHref(filter).slice("/jobs".length)}`;
  const page = usePoll(key, (signal) => api.jobs(filter, signal));

  const apply = (changes: Partial<Record<FilterKey, string>>, replace = false) => {
    const next: JobFilter = { ...filter, ...changes, cursor: undefined } as JobFilter;
    navigate(jobsHref(next), { replace });
  };
  const anyFilter = FILTER_KEYS.some((k) => filter[k]);
  const jobs = page.data?.jobs ?? [];
  const selection = useSelection();
  // A new filter or page starts with nothing selected; rows gone from the page drop out.
  useEffect(() => selection.clear(), [key]);
  const selected = jobs.filter((j) => selection.ids.has(j.id));
  const nextCursor = page.data?.next_cursor ?? null;

  return (
    <div class="page" data-testid="page-jobs">
      <h1>Jobs</h1>
      <JobFilters filter={filter} apply={apply} />
      {!readOnly && <EnqueuePanel />}
      {!readOnly && (filter.state || filter.kind || filter.queue || filter.tag || filter.q)
        ? <BulkBar filter={filter} onDone={page.refresh} />
        : null}
      {!readOnly && (
        <SelectionBar
          jobs={selected}
          selected={selected.length}
          onClear={selection.clear}
          onDone={page.refresh}
        />
      )}

      <div class="list-meta">
        {!readOnly && jobs.length > 0 && (
          <label class="select-all">
            <input
              type="checkbox"
              data-testid="select-all"
              checked={selected.length === jobs.length}
              onChange={(e) =>
                selection.set((e.currentTarget as HTMLInputElement).checked ? jobs.map((j) => j.id) : [])}
            />{" "}
            Select all
          </label>
        )}
        <span data-testid="jobs-count" aria-live="polite">
          {page.data
            ? `${jobs.length} job${jobs.length === 1 ? "" : "s"} on this page${
              filter.cursor ? " (a later page)" : ""
            }`
            : "Loading…"}
        </span>
      </div>

      <JobsTable
        jobs={jobs}
        current={page.current}
        selection={readOnly ? undefined : selection}
        actions={readOnly ? undefined : (j) => <RowActions job={j} onDone={page.refresh} />}
      />
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

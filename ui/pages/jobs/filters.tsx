/** @jsxImportSource preact */
/// <reference lib="dom" />
/** The jobs list's filter form: state, kind, queue (selects), tag and text in args (typed). */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, JOB_STATES, type JobFilter } from "../../api.ts";
import { Link } from "../../components/link.tsx";
import { stateLabel } from "../../format.ts";

export const FILTER_KEYS = ["state", "kind", "queue", "tag", "q"] as const;
export type FilterKey = typeof FILTER_KEYS[number];
const TYPING_DELAY_MS = 400;

/** Distinct values for the kind and queue selects (fetched once per visit, not polled). */
export function useChoices(): { kinds: string[]; queues: string[] } {
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

function Select(
  { label, testid, value, all, options, onPick }: {
    label: string;
    testid: string;
    value: string;
    all: string;
    options: { value: string; label: string }[];
    onPick: (v: string) => void;
  },
) {
  return (
    <label>
      <span>{label}</span>
      <select
        data-testid={testid}
        value={value}
        onChange={(e) => onPick((e.currentTarget as HTMLSelectElement).value)}
      >
        <option value="">{all}</option>
        {options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
      </select>
    </label>
  );
}

function TextFilter(
  { label, testid, value, placeholder, search, onType }: {
    label: string;
    testid: string;
    value: string;
    placeholder: string;
    search?: boolean;
    onType: (v: string) => void;
  },
) {
  return (
    <label class={search ? "filter-search" : undefined}>
      <span>{label}</span>
      <input
        type="search"
        data-testid={testid}
        value={value}
        placeholder={placeholder}
        autocomplete="off"
        onInput={(e) => onType((e.currentTarget as HTMLInputElement).value)}
      />
    </label>
  );
}

const asOptions = (xs: string[]) => xs.map((x) => ({ value: x, label: x }));

/**
 * The form. Selects apply at once; the text fields are typed locally and applied after a pause or on
 * Enter (`apply(changes, replace)` writes the URL).
 */
export function JobFilters(
  { filter, apply }: {
    filter: JobFilter;
    apply: (changes: Partial<Record<FilterKey, string>>, replace?: boolean) => void;
  },
) {
  const choices = useChoices();
  const [tag, setTag] = useState(filter.tag ?? "");
  const [q, setQ] = useState(filter.q ?? "");
  const typing = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => {
    // Keep what is being typed (a trailing space, say) when the URL already matches it.
    setTag((prev) => (prev.trim() === (filter.tag ?? "") ? prev : filter.tag ?? ""));
    setQ((prev) => (prev.trim() === (filter.q ?? "") ? prev : filter.q ?? ""));
  }, [filter.tag, filter.q]);
  useEffect(() => () => clearTimeout(typing.current), []);

  const now = (changes: Partial<Record<FilterKey, string>>) => {
    clearTimeout(typing.current);
    apply(changes);
  };
  const typed = (changes: Partial<Record<FilterKey, string>>) => {
    clearTimeout(typing.current);
    typing.current = setTimeout(() => apply(changes, true), TYPING_DELAY_MS);
  };
  const anyFilter = FILTER_KEYS.some((k) => filter[k]);

  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        now({ tag: tag.trim(), q: q.trim() });
      }}
      role="search"
      aria-label="Filter jobs"
    >
      <Select
        label="State"
        testid="filter-state"
        value={filter.state ?? ""}
        all="All states"
        options={JOB_STATES.map((s) => ({ value: s, label: stateLabel(s) }))}
        onPick={(v) => now({ state: v })}
      />
      {(["kind", "queue"] as const).map((k) => (
        <Select
          key={k}
          label={k === "kind" ? "Kind" : "Queue"}
          testid={`filter-${k}`}
          value={filter[k] ?? ""}
          all={`All ${k}s`}
          options={asOptions(withCurrent(k === "kind" ? choices.kinds : choices.queues, filter[k]))}
          onPick={(v) => now({ [k]: v })}
        />
      ))}
      <TextFilter
        label="Tag"
        testid="filter-tag"
        value={tag}
        placeholder="any tag"
        onType={(v) => {
          setTag(v);
          typed({ tag: v.trim() });
        }}
      />
      <TextFilter
        label="Search args"
        testid="search-input"
        search
        value={q}
        placeholder="text in args"
        onType={(v) => {
          setQ(v);
          typed({ q: v.trim() });
        }}
      />
      <div class="filter-buttons">
        <button type="submit" class="btn" data-testid="filters-apply">Apply</button>
        {anyFilter && <Link href="/jobs" class="btn btn-ghost" data-testid="filters-clear">Clear</Link>}
      </div>
    </form>
  );
}

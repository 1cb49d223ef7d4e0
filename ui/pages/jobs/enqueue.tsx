/** @jsxImportSource preact */
/// <reference lib="dom" />
/**
 * Enqueue a job from a form: kind, queue, args as JSON (checked as it is typed: an object, or the
 * button stays disabled and says why), priority and an optional run_at (local time in the browser's
 * zone, sent as RFC 3339 with its offset). On success the job's page opens.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, type EnqueueRequest } from "../../api.ts";
import { useAction } from "../../hooks.ts";
import { navigate } from "../../router.ts";
import { useApp } from "../../state.ts";
import { useChoices } from "./filters.tsx";

/** The args text as an object, or the reason it is not one. */
export function parseArgs(text: string): { args: Record<string, unknown> } | { error: string } {
  if (text.trim() === "") return { args: {} };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { error: `not valid JSON: ${(e as Error).message}` };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return { error: 'args must be a JSON object, such as {"to": "a@example.com"}' };
  }
  return { args: v as Record<string, unknown> };
}

/** A `datetime-local` value ("2026-11-23T15:30") as RFC 3339 in UTC; null when empty or impossible. */
export function localToRfc3339(value: string): string | null {
  if (!value) return null;
  const d = new Date(value); // a date-time without an offset is local time
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

function Field({ label, children, wide }: { label: string; children: ComponentChildren; wide?: boolean }) {
  return (
    <label class={wide ? "field field-wide" : "field"}>
      <span>{label}</span>
      {children}
    </label>
  );
}

/** A text input offering known values (kinds, queues) in a datalist. */
function ListInput(
  { label, name, value, options, onInput }: {
    label: string;
    name: string;
    value: string;
    options: string[];
    onInput: (v: string) => void;
  },
) {
  return (
    <Field label={label}>
      <input
        type="text"
        data-testid={`enqueue-${name}`}
        value={value}
        list={`enqueue-${name}s`}
        autocomplete="off"
        onInput={(e) => onInput((e.currentTarget as HTMLInputElement).value)}
      />
      <datalist id={`enqueue-${name}s`}>{options.map((o) => <option key={o} value={o} />)}</datalist>
    </Field>
  );
}

export function EnqueuePanel() {
  const { notify, caps } = useApp();
  const action = useAction();
  const choices = useChoices();
  const [kind, setKind] = useState("");
  const [queue, setQueue] = useState(caps.default_queue ?? "default");
  const [argsText, setArgsText] = useState("{}");
  const [priority, setPriority] = useState("2");
  const [runAt, setRunAt] = useState("");

  const parsed = parseArgs(argsText);
  const argsError = "error" in parsed ? parsed.error : null;
  const runAtIso = localToRfc3339(runAt);
  const problem = kind.trim() === ""
    ? "a kind is needed"
    : argsError
    ? "args: " + argsError
    : runAt && !runAtIso
    ? "run at is not a date and time"
    : null;

  const submit = (e: Event) => {
    e.preventDefault();
    if (problem || "error" in parsed) return;
    const body: EnqueueRequest = { kind: kind.trim(), args: parsed.args, priority: Number(priority) };
    if (queue.trim()) body.queue = queue.trim();
    if (runAtIso) body.run_at = runAtIso;
    action.run("enqueue", () => api.enqueue(body), (r) => {
      notify(`Enqueued job #${r.job.id} (${r.job.kind}, ${r.job.state.replace(/_/g, " ")}).`);
      navigate(`/jobs/${r.job.id}`);
    });
  };

  return (
    <details class="card enqueue" data-testid="enqueue-panel">
      <summary data-testid="enqueue-open">Enqueue a job…</summary>
      <form class="enqueue-form" onSubmit={submit} aria-label="Enqueue a job" noValidate>
        <ListInput label="Kind" name="kind" value={kind} options={choices.kinds} onInput={setKind} />
        <ListInput label="Queue" name="queue" value={queue} options={choices.queues} onInput={setQueue} />
        <Field label="Priority">
          <select
            data-testid="enqueue-priority"
            value={priority}
            onChange={(e) => setPriority((e.currentTarget as HTMLSelectElement).value)}
          >
            <option value="1">1 (highest)</option>
            <option value="2">2 (default)</option>
            <option value="3">3</option>
            <option value="4">4 (lowest)</option>
          </select>
        </Field>
        <Field label="Run at (local time; empty: now)">
          <input
            type="datetime-local"
            data-testid="enqueue-run-at"
            value={runAt}
            step={1}
            onInput={(e) => setRunAt((e.currentTarget as HTMLInputElement).value)}
          />
        </Field>
        <Field label="Args (a JSON object)" wide>
          <textarea
            data-testid="enqueue-args"
            rows={4}
            spellcheck={false}
            value={argsText}
            aria-invalid={argsError ? "true" : "false"}
            aria-describedby="enqueue-args-error"
            onInput={(e) => setArgsText((e.currentTarget as HTMLTextAreaElement).value)}
          />
        </Field>
        <p id="enqueue-args-error" class="form-error" data-testid="enqueue-problem" role="status">
          {problem && kind.trim() !== "" ? problem : ""}
        </p>
        <div class="enqueue-buttons">
          <button
            type="submit"
            class="btn btn-primary"
            data-testid="enqueue-submit"
            disabled={problem !== null || action.busy !== null}
            title={problem ?? undefined}
          >
            {action.busy === "enqueue" ? "Enqueuing…" : "Enqueue"}
          </button>
        </div>
      </form>
    </details>
  );
}

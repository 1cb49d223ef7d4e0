/** @jsxImportSource preact */
/// <reference lib="dom" />
/** The top bar's "find a job" box: an id (with or without `#`) opens that job's page. */
import { useState } from "preact/hooks";
import { navigate } from "../router.ts";

/** The job id typed ("42", "#42", " 42 "), or null when it is not one. */
export function jobIdOf(text: string): string | null {
  const m = /^#?\s*(\d{1,16})$/.exec(text.trim());
  return m && Number(m[1]) >= 1 ? String(Number(m[1])) : null;
}

export function FindJob() {
  const [text, setText] = useState("");
  const [bad, setBad] = useState(false);
  return (
    <form
      class="jump"
      role="search"
      aria-label="Find a job by id"
      onSubmit={(e) => {
        e.preventDefault();
        const id = jobIdOf(text);
        setBad(id === null);
        if (id !== null) {
          setText("");
          navigate(`/jobs/${id}`);
        }
      }}
    >
      <input
        type="search"
        inputMode="numeric"
        data-testid="find-job"
        placeholder="Job id…"
        aria-label="Job id"
        aria-invalid={bad ? "true" : "false"}
        value={text}
        onInput={(e) => {
          setText((e.currentTarget as HTMLInputElement).value);
          setBad(false);
        }}
      />
      {bad && <span class="jump-error" data-testid="find-job-error" role="status">not a job id</span>}
    </form>
  );
}

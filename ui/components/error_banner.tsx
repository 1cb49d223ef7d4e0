/** @jsxImportSource preact */
import type { ApiError } from "../api.ts";

/** The API's errors, one line each with their code; the dismiss button clears them all. */
export function ErrorBanner({ errors, onDismiss }: { errors: ApiError[]; onDismiss: () => void }) {
  if (errors.length === 0) return null;
  return (
    <div class="banner banner-error" role="alert" data-testid="error-banner">
      <ul>
        {errors.map((e, i) => (
          <li key={i} data-testid="error-message">
            <strong>{e.message}</strong> <code data-testid="error-code">{e.code}</code>
            {e.status ? <span class="http-status">HTTP {e.status}</span> : null}
          </li>
        ))}
      </ul>
      <button type="button" class="btn btn-small" onClick={onDismiss} data-testid="error-dismiss">
        Dismiss
      </button>
    </div>
  );
}

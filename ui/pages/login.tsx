/** @jsxImportSource preact */
/**
 * The login form, shown instead of the pages when the server has a token (`svc serve --auth-token`)
 * and this browser has no session: the token goes to `POST /api/login`, which answers with an HttpOnly
 * session cookie, so the token itself is never kept by the page.
 */
import { useState } from "preact/hooks";
import { api, toApiError } from "../api.ts";
import { useTitle } from "../hooks.ts";

export function Login({ onLoggedIn }: { onLoggedIn: () => void }) {
  useTitle("Log in");
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.login(token);
      setToken("");
      onLoggedIn();
    } catch (err) {
      const a = toApiError(err);
      setError(a.code === "unauthorized" ? "That is not the token of this server." : a.message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="page login" data-testid="page-login">
      <h1>Log in</h1>
      <p class="muted">
        This server needs its token (<code>--auth-token</code> or <code>SERVICE_AUTH_TOKEN</code>).
      </p>
      <form class="login-form" onSubmit={submit} data-testid="login-form">
        <label>
          <span>Token</span>
          <input
            type="password"
            name="token"
            autocomplete="current-password"
            required
            value={token}
            data-testid="login-token"
            onInput={(e) => setToken((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <button
          type="submit"
          class="btn btn-primary"
          disabled={busy || token === ""}
          data-testid="login-submit"
        >
          Log in
        </button>
        {error && <p class="login-error" role="alert" data-testid="login-error">{error}</p>}
      </form>
    </div>
  );
}

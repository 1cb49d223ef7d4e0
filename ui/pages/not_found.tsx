/** @jsxImportSource preact */
import { Link } from "../components/link.tsx";
import { useTitle } from "../hooks.ts";

export function NotFound() {
  useTitle("Not found");
  return (
    <div class="page" data-testid="page-not-found">
      <h1>Page not found</h1>
      <p>
        Nothing lives at this address. <Link href="/">Back to the dashboard</Link>
      </p>
    </div>
  );
}

"""A function endpoint for an svc HTTP worker (mode "async"), in Python with the standard library.

The worker POSTs each `greet` job here. The endpoint checks X-Service-Signature (when it has the secret),
answers 202 at once, does the work in a thread, and calls back `complete` with the result, forwarding the
signature header unchanged. A handler that raises fails the job through the `fail` callback
(TerminalError: for good; anything else: retried); `call.heartbeat(seconds)` asks for more time.

Run:
    PORT=8000 SERVICE_CALLBACK_HMAC_SECRET=<64 hex> python examples/function_endpoint.py
and point the worker's HTTP worker at it:
    httpWorkers: { greet: { url: "http://127.0.0.1:8000/", mode: "async", callbackBaseUrl, hmacSecret } }
Without SERVICE_CALLBACK_HMAC_SECRET requests are not checked (the signature is still forwarded).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

from svc_queue import FunctionCall, FunctionEndpoint, TerminalError, parse_secret


def greet(call: FunctionCall) -> dict[str, Any]:
    """The work: what it returns becomes the job's result."""
    name = call.args.get("name")
    if not isinstance(name, str) or name == "":
        raise TerminalError("args.name must be a non-empty string")  # no retry can fix the input
    if call.args.get("slow"):
        call.heartbeat(600)  # long work ahead: move the callback's deadline 10 minutes out
    return {"greeting": f"hello, {name}", "attempt": call.attempt}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    secret_hex = os.environ.get("SERVICE_CALLBACK_HMAC_SECRET")
    endpoint = FunctionEndpoint(
        {"greet": greet},
        secret=parse_secret(secret_hex) if secret_hex else None,
        host=os.environ.get("HOST", "127.0.0.1"),
        port=int(os.environ.get("PORT", "8000")),
    )
    # SIGTERM ends serve_forever like Ctrl-C; close() then waits for the jobs in progress.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on {endpoint.url}", flush=True)
    try:
        endpoint.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.close()


if __name__ == "__main__":
    main()

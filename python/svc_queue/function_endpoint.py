"""A function endpoint for svc HTTP workers (mode ``async``), on the standard library's HTTP server.

The worker POSTs the function request (``job_id``, ``kind``, ``args``, ``attempt``, ``max_attempts``,
``callback_id``, ``callback_url``, ``fail_url``, ``heartbeat_url``) with the ``X-Service-Signature``
header. The endpoint checks the signature when it has the secret, answers 202 at once (the worker
parks the job in ``waiting_external``), runs the handler of the job's kind in a thread pool, and calls
back: ``complete`` with the handler's return value, ``fail`` when it raises (``TerminalError``: failed
for good; any other exception: retried per the job's policy). Callbacks forward the signature the
worker sent, so a function without the secret works too (it then cannot check requests).

Statuses it answers, which decide what the worker does with the job: 202 accepted; 400 a request that
is not a function request, 401 a missing or wrong signature, 404 no handler for the kind, 413 a body
too large (4xx: the job fails for good); 503 when its queue of pending work is full (5xx: retried).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Callable, Mapping

from .contract import SIGNATURE_HEADER, is_uuid, verify
from .errors import CallbackRequestError, TerminalError, ValidationError
from .validation import check_json_value, check_text, json_text

__all__ = ["FunctionCall", "FunctionEndpoint", "Handler", "post_callback"]

Handler = Callable[["FunctionCall"], Any]
"""A job handler: takes the call, returns the payload of ``complete`` (any JSON value)."""

_log = logging.getLogger("svc_queue.function_endpoint")
_MAX_ERROR_CHARS = 4000
_RETRY_STATUSES = (500, 502, 503, 504)


def post_callback(
    url: str,
    body: Mapping[str, Any],
    signature: str | None = None,
    *,
    timeout: float = 30.0,
    attempts: int = 3,
) -> dict[str, Any]:
    """POSTs a callback body to ``url`` with the signature header (when given); returns the
    receiver's JSON answer (``{job_id, callback_id, state}``, plus ``timeout_at`` after a heartbeat).

    Refusals raise :class:`CallbackRequestError` with the status and the receiver's code (404
    ``callback_not_found``, 409 ``callback_not_pending``, 401 ``invalid_signature``, ...). A request
    that got no answer, or a 500/502/503/504, is tried again (``attempts`` in all, 0.5 s then 1 s apart).
    """
    data = json_text(dict(body)).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    last: CallbackRequestError | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            time.sleep(0.5 * 2 ** (attempt - 1))
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                answer = _json_or_text(res.read())
                return answer if isinstance(answer, dict) else {"body": answer}
        except urllib.error.HTTPError as e:
            answer = _json_or_text(e.read())
            code = answer.get("code") if isinstance(answer, dict) else None
            message = answer.get("error") if isinstance(answer, dict) else None
            last = CallbackRequestError(
                f"{url} answered {e.code}: {message or answer or e.reason}",
                status=e.code,
                code=str(code or f"http_{e.code}"),
                body=answer,
            )
            if e.code not in _RETRY_STATUSES:
                raise last from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            last = CallbackRequestError(f"could not reach {url}: {reason}", status=None, code="unreachable")
    assert last is not None
    raise last


def _json_or_text(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text[:1024]


def _sibling(complete_url: str, action: str) -> str:
    """The fail or heartbeat URL next to a complete URL (for workers that do not send them)."""
    base = complete_url[: -len("/complete")] if complete_url.endswith("/complete") else complete_url
    return f"{base}/{action}"


class FunctionCall:
    """One function request being worked on, with the callbacks of its job.

    A handler returns the payload to complete the job with; or resolves the callback itself with
    :meth:`complete` or :meth:`fail`; or calls :meth:`defer` when something else will call back later
    (then returning completes nothing). :meth:`heartbeat` moves the callback's deadline for long work.
    """

    def __init__(self, request: Mapping[str, Any], signature: str | None, timeout: float) -> None:
        self.request: dict[str, Any] = dict(request)
        """The function request as received."""
        self.job_id: int = request["job_id"]
        self.kind: str = request["kind"]
        self.args: dict[str, Any] = request["args"]
        self.attempt: int = request["attempt"]
        self.max_attempts: int = request["max_attempts"]
        self.callback_id: str = request["callback_id"]
        self.callback_url: str = request["callback_url"]
        self.fail_url: str = request.get("fail_url") or _sibling(self.callback_url, "fail")
        self.heartbeat_url: str = request.get("heartbeat_url") or _sibling(self.callback_url, "heartbeat")
        self.signature = signature
        """The X-Service-Signature the worker sent (forwarded on every callback), or None."""
        self.resolved = False
        """True once :meth:`complete` or :meth:`fail` was answered."""
        self.deferred = False
        self._timeout = timeout

    def _post(self, action: str, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            answer = post_callback(url, body, self.signature, timeout=self._timeout)
        except CallbackRequestError as e:
            _log.warning("job %s: %s answered %s %s", self.job_id, action, e.status or "nothing", e)
            raise
        _log.info("job %s: %s answered 200 %s", self.job_id, action, json_text(answer))
        return answer

    def complete(self, payload: Any = None) -> dict[str, Any]:
        """Completes the job with ``payload`` as its result; returns the receiver's answer."""
        body = {} if payload is None else {"payload": check_json_value("payload", payload)}
        answer = self._post("complete", self.callback_url, body)
        self.resolved = True
        return answer

    def fail(self, error: str, retryable: bool = False) -> dict[str, Any]:
        """Fails the attempt: for good, or with ``retryable=True`` retried per the job's policy."""
        if not isinstance(error, str):
            raise ValidationError("error must be a string")
        error = check_text("error", error[:_MAX_ERROR_CHARS])
        answer = self._post("fail", self.fail_url, {"error": error, "retryable": bool(retryable)})
        self.resolved = True
        return answer

    def heartbeat(self, timeout_seconds: int) -> dict[str, Any]:
        """Sets the callback's deadline to now + ``timeout_seconds`` (1 to 2592000); returns the answer
        with the new deadline as ``timeout_at``."""
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int):
            raise ValidationError("timeout_seconds must be an integer")
        return self._post("heartbeat", self.heartbeat_url, {"timeout_seconds": timeout_seconds})

    def defer(self) -> None:
        """Something else calls back later (another process, a webhook): returning completes nothing."""
        self.deferred = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    endpoint: FunctionEndpoint


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "svc-queue-function"

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s %s", self.address_string(), format % args)

    def _answer(self, status: int, code: str | None = None, message: str | None = None) -> None:
        body = b"" if code is None else json.dumps({"error": message, "code": code}).encode()
        self.send_response(status)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        status, code, message = self.server.endpoint._accept(self)
        self._answer(status, code, message)

    def _not_allowed(self) -> None:
        self._answer(405, "method_not_allowed", f"{self.command} is not allowed here: use POST")

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815


class FunctionEndpoint:
    """An HTTP function endpoint that runs ``handlers`` (by job kind, or one callable for every kind).

    ``secret`` (32 bytes, from ``parse_secret``) makes it check ``X-Service-Signature`` on every
    request (401 when missing or wrong); without it requests are not checked, and the signature is
    still forwarded. Requests are accepted on any path. ``max_workers`` handlers run at once; up to
    ``max_pending`` more wait (beyond that: 503, which the worker retries). ``port=0`` picks a free
    port (see :attr:`url`).

    Run it with :meth:`serve_forever`, or :meth:`start` in a background thread; :meth:`close` stops
    accepting and waits for the running handlers.
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | Handler,
        *,
        secret: bytes | None = None,
        host: str = "127.0.0.1",
        port: int = 8000,
        max_workers: int = 8,
        max_pending: int = 1000,
        max_body_bytes: int = 16 * 1024 * 1024,
        callback_timeout: float = 30.0,
    ) -> None:
        if secret is not None and (not isinstance(secret, (bytes, bytearray)) or len(secret) != 32):
            raise ValidationError("secret must be 32 bytes: parse the 64-hex-character setting with parse_secret()")
        self._handlers = handlers
        self._secret = None if secret is None else bytes(secret)
        self._max_pending = max_pending
        self._max_body = max_body_bytes
        self._callback_timeout = callback_timeout
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="svc-function")
        self._pending = 0
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._server = _Server((host, port), _RequestHandler)
        self._server.endpoint = self
        self._thread: threading.Thread | None = None
        self._serving = False
        self._closed = False

    @property
    def url(self) -> str:
        """``http://host:port`` the endpoint listens on."""
        host, port = self._server.server_address[:2]
        host = str(host)
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def serve_forever(self) -> None:
        """Serves in this thread until :meth:`close` (from another thread) or an exception."""
        self._serving = True
        try:
            self._server.serve_forever(poll_interval=0.2)
        finally:
            self._serving = False

    def start(self) -> FunctionEndpoint:
        """Serves in a background thread; returns self."""
        self._serving = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.2,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops accepting requests and waits for the handlers that are running or pending."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
        self._executor.shutdown(wait=True)

    def __enter__(self) -> FunctionEndpoint:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------------

    def _handler_for(self, kind: str) -> Handler | None:
        if callable(self._handlers) and not isinstance(self._handlers, Mapping):
            return self._handlers
        return self._handlers.get(kind)

    def _accept(self, req: _RequestHandler) -> tuple[int, str | None, str | None]:
        """Checks one request and queues its work: (status, error code, message)."""
        length_header = req.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            return 411, "length_required", "send the function request with a Content-Length"
        length = int(length_header)
        if length > self._max_body:
            return 413, "payload_too_large", f"request body is larger than {self._max_body} bytes"
        try:
            body = json.loads(req.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return 400, "invalid_body", "body is not JSON"
        problem = _request_problem(body)
        if problem:
            return 400, "invalid_body", f"not a function request: {problem}"
        signature = req.headers.get(SIGNATURE_HEADER)
        if self._secret is not None:
            if signature is None:
                return 401, "missing_signature", f"missing {SIGNATURE_HEADER} header"
            if not verify(self._secret, body["callback_id"], signature):
                return 401, "invalid_signature", f"invalid {SIGNATURE_HEADER} for this callback id"
        handler = self._handler_for(body["kind"])
        if handler is None:
            return 404, "unknown_kind", f"no handler for job kind {body['kind']!r}"
        key = req.headers.get("Idempotency-Key") or f"{body['job_id']}:{body['attempt']}"
        with self._lock:
            if key in self._in_flight:
                return 202, None, None  # the same attempt again (a retried POST): already being worked on
            if self._pending >= self._max_pending or self._closed:
                return 503, "busy", "too much pending work: try again later"
            self._pending += 1
            self._in_flight.add(key)
        call = FunctionCall(body, signature, self._callback_timeout)
        self._executor.submit(self._run, handler, call, key)
        return 202, None, None

    def _run(self, handler: Handler, call: FunctionCall, key: str) -> None:
        try:
            try:
                result = handler(call)
            except TerminalError as e:
                if not call.resolved:
                    call.fail(str(e) or "terminal error", retryable=False)
            except Exception as e:  # noqa: BLE001 (any handler error fails the attempt, retryable)
                _log.warning("job %s: handler raised %s: %s", call.job_id, type(e).__name__, e)
                if not call.resolved:
                    call.fail(f"{type(e).__name__}: {e}", retryable=True)
            else:
                if not call.resolved and not call.deferred:
                    try:
                        payload = check_json_value("the handler's result", result)
                    except ValidationError as e:
                        call.fail(str(e), retryable=False)
                    else:
                        call.complete(payload)
        except CallbackRequestError:
            pass  # logged by the call; the callback timeout retries the job if nothing was recorded
        except Exception:  # noqa: BLE001
            _log.exception("job %s: could not call back", call.job_id)
        finally:
            with self._lock:
                self._pending -= 1
                self._in_flight.discard(key)


def _request_problem(body: Any) -> str | None:
    """Why ``body`` is not a function request, or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    for name in ("job_id", "attempt", "max_attempts"):
        v = body.get(name)
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{name} must be an integer"
    if not isinstance(body.get("kind"), str):
        return "kind must be a string"
    if not isinstance(body.get("args"), dict):
        return "args must be a JSON object"
    if not isinstance(body.get("callback_id"), str) or not is_uuid(body["callback_id"]):
        return "callback_id must be a UUID"
    if not isinstance(body.get("callback_url"), str) or not body["callback_url"].startswith(("http://", "https://")):
        return "callback_url must be an http(s) URL"
    for name in ("fail_url", "heartbeat_url"):
        if body.get(name) is not None and not isinstance(body[name], str):
            return f"{name} must be a string"
    return None

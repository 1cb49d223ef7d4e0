"""External completion end to end, on both storage engines: a TypeScript worker (createWorker with HTTP
workers, and a callback receiver from createCallbackRouter) pushes jobs to the Python example endpoint
(python/examples/function_endpoint.py, its own process) and to a FunctionEndpoint in this process; the
callbacks come back over HTTP or through the client's *_external methods."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest
from conftest import (
    DATABASE_URL,
    ENGINES,
    Process,
    drop_schema,
    fresh_schema,
    json_key,
    migrate,
    start_example,
    start_ts_worker,
    wait_for,
    wait_state,
)

from svc_queue import (
    CallbackNotFoundError,
    CallbackNotPendingError,
    CallbackRequestError,
    Client,
    FunctionCall,
    FunctionEndpoint,
    ValidationError,
    callback_url,
    parse_secret,
    post_callback,
    sign,
)

SECRET_HEX = "d00d" * 16
OTHER_SECRET_HEX = "beef" * 16
SECRET = parse_secret(SECRET_HEX)


class Calls:
    """Function calls the in-process endpoint received, by job id (the latest attempt's)."""

    def __init__(self) -> None:
        self._calls: dict[int, FunctionCall] = {}
        self._cond = threading.Condition()

    def add(self, call: FunctionCall) -> None:
        with self._cond:
            self._calls[call.job_id] = call
            self._cond.notify_all()

    def wait(self, job_id: int, attempt: int = 1, timeout: float = 15.0) -> FunctionCall:
        with self._cond:
            ok = self._cond.wait_for(
                lambda: job_id in self._calls and self._calls[job_id].attempt >= attempt, timeout
            )
            assert ok, f"no function call for job {job_id} attempt {attempt}"
            return self._calls[job_id]


@dataclass
class Stack:
    engine: str
    schema: str
    client: Client
    worker: Process
    receiver: str
    example: Process
    calls: Calls


@pytest.fixture(scope="module", params=ENGINES)
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    engine = str(request.param)
    schema = fresh_schema()
    calls = Calls()

    def manual(call: FunctionCall) -> None:
        call.defer()  # the test resolves it
        calls.add(call)

    def boom(call: FunctionCall) -> None:
        calls.add(call)
        raise RuntimeError("boom")

    started: list[Any] = []
    try:
        migrate(schema, engine)
        example, example_url = start_example(SECRET_HEX)
        started.append(example)
        forged, forged_url = start_example(OTHER_SECRET_HEX)  # not the worker's secret: every request is refused
        started.append(forged)
        endpoint = FunctionEndpoint({"manual": manual, "boom": boom}, secret=SECRET, port=0).start()
        started.append(endpoint)
        worker, info = start_ts_worker(
            schema,
            {"greet": example_url, "forged": forged_url, "manual": endpoint.url, "boom": endpoint.url},
            SECRET_HEX,
        )
        started.append(worker)
        client = Client(DATABASE_URL, schema=schema, max_connections=4)
        started.append(client)
        yield Stack(engine, schema, client, worker, info["receiver"], example, calls)
    finally:
        for thing in reversed(started):
            try:
                thing.close() if hasattr(thing, "close") else thing.stop()
            except Exception as e:  # noqa: BLE001 (stop the rest)
                print(f"teardown: {e}")
        drop_schema(schema)


def manual_job(s: Stack, **opts: Any) -> tuple[int, FunctionCall]:
    """A job pushed to the in-process endpoint, parked in waiting_external; its call."""
    job = s.client.enqueue("manual", {"n": 1}, **opts)
    call = s.calls.wait(job.id)
    wait_state(s.client, job.id, ("waiting_external",))
    return job.id, call


def test_example_completes_a_signed_job(stack: Stack) -> None:
    job = stack.client.enqueue("greet", {"name": "Ada"})
    done = wait_state(stack.client, job.id, ("completed", "failed", "retryable"))
    assert done.state == "completed", done.errors
    assert done.result == {"greeting": "hello, Ada", "attempt": 1}
    line = stack.example.wait_line(lambda ln: f"job {job.id}: complete answered 200" in ln and ln, 10)
    assert '"state":"completed"' in line


def test_example_fails_a_job_for_good_through_the_fail_callback(stack: Stack) -> None:
    job = stack.client.enqueue("greet", {}, max_attempts=5)
    done = wait_state(stack.client, job.id, ("failed", "completed"))
    assert done.state == "failed" and done.attempt == 1
    assert "args.name must be a non-empty string" in done.errors[-1]["error"]
    stack.example.wait_line(lambda ln: f"job {job.id}: fail answered 200" in ln, 10)


def test_example_heartbeats_then_completes(stack: Stack) -> None:
    job = stack.client.enqueue("greet", {"name": "Bo", "slow": True})
    done = wait_state(stack.client, job.id, ("completed", "failed", "retryable"))
    assert done.state == "completed" and done.result == {"greeting": "hello, Bo", "attempt": 1}
    line = stack.example.wait_line(lambda ln: f"job {job.id}: heartbeat answered 200" in ln and ln, 10)
    # the heartbeat may come before the worker parked the attempt (state running) or after
    assert '"timeout_at":' in line and ('"state":"waiting_external"' in line or '"state":"running"' in line)


def test_example_refuses_a_wrong_signature_with_401(stack: Stack) -> None:
    job = stack.client.enqueue("forged", {"name": "Eve"}, max_attempts=5)
    done = wait_state(stack.client, job.id, ("failed", "completed", "retryable"))
    assert done.state == "failed" and done.attempt == 1  # a 4xx is terminal
    assert "401" in done.errors[-1]["error"] and "invalid_signature" in done.errors[-1]["error"]


def test_receiver_status_codes(stack: Stack) -> None:
    job = stack.client.enqueue("greet", {"name": "Cy"})
    done = wait_state(stack.client, job.id, ("completed",))
    assert done.callback_id
    cb = done.callback_id
    url = callback_url(stack.receiver, None, cb)

    def refused(url: str, body: dict[str, Any], signature: str | None) -> CallbackRequestError:
        with pytest.raises(CallbackRequestError) as e:
            post_callback(url, body, signature, attempts=1)
        return e.value

    e = refused(url, {"payload": 1}, sign(SECRET, cb))
    assert (e.status, e.code) == (409, "callback_not_pending")
    unknown = str(uuid.uuid4())
    e = refused(callback_url(stack.receiver, None, unknown), {"payload": 1}, sign(SECRET, unknown))
    assert (e.status, e.code) == (404, "callback_not_found")
    e = refused(url, {"payload": 1}, sign(parse_secret(OTHER_SECRET_HEX), cb))
    assert (e.status, e.code) == (401, "invalid_signature")
    e = refused(url, {"payload": 1}, None)
    assert (e.status, e.code) == (401, "missing_signature")
    e = refused(callback_url(stack.receiver, None, "not-a-uuid"), {}, sign(SECRET, "not-a-uuid"))
    assert (e.status, e.code) == (400, "invalid_callback_id")
    e = refused(callback_url(stack.receiver, None, cb, "heartbeat"), {"timeout_seconds": 0}, sign(SECRET, cb))
    assert (e.status, e.code) == (400, "invalid_body")
    after = stack.client.get_job(job.id)
    assert after is not None and after.result == done.result


def test_complete_external(stack: Stack) -> None:
    job_id, call = manual_job(stack)
    r = stack.client.complete_external(call.callback_id, {"ok": True})
    assert (r.job_id, r.callback_id, r.state, r.timeout_at) == (job_id, call.callback_id, "completed", None)
    job = stack.client.get_job(job_id)
    assert job is not None and job.state == "completed" and job.result == {"ok": True}
    with pytest.raises(CallbackNotPendingError) as e:
        stack.client.complete_external(call.callback_id.upper(), {"again": True})
    assert e.value.job_state == "completed" and e.value.code == "callback_not_pending"
    with pytest.raises(CallbackRequestError) as http:
        call.complete({"late": True})  # over HTTP, with the forwarded signature: 409
    assert (http.value.status, http.value.code) == (409, "callback_not_pending")
    with pytest.raises(CallbackNotFoundError):
        stack.client.complete_external(str(uuid.uuid4()))


def test_fail_external(stack: Stack) -> None:
    job_id, call = manual_job(stack, max_attempts=5)
    r = stack.client.fail_external(call.callback_id, "upstream said no", retryable=True)
    assert r.state == "retryable"
    job = stack.client.get_job(job_id)
    assert job is not None and job.state == "retryable" and job.errors[-1]["error"] == "upstream said no"
    stack.client.cancel(job_id)

    job_id, call = manual_job(stack, max_attempts=5)
    r = stack.client.fail_external(call.callback_id, "bad input")
    assert r.state == "failed"  # terminal by default
    with pytest.raises(CallbackNotPendingError):
        stack.client.fail_external(call.callback_id, "again")
    with pytest.raises(ValidationError, match="error must be a string"):
        stack.client.fail_external(call.callback_id, None)  # type: ignore[arg-type]


def test_heartbeat_external_then_complete_over_http(stack: Stack) -> None:
    job_id, call = manual_job(stack)
    for bad in [0, 2_592_001, True, 1.5, None]:
        with pytest.raises(ValidationError, match="timeout_seconds must be an integer from 1 to 2592000"):
            stack.client.heartbeat_external(call.callback_id, bad)  # type: ignore[arg-type]
    before = datetime.now(timezone.utc)
    r = stack.client.heartbeat_external(call.callback_id, 600)
    assert r.state == "waiting_external" and r.timeout_at is not None
    assert timedelta(seconds=590) < r.timeout_at - before < timedelta(seconds=610)
    job = stack.client.get_job(job_id)
    assert job is not None and job.callback_timeout_at is not None
    assert abs(job.callback_timeout_at - r.timeout_at) < timedelta(milliseconds=2)
    answer = call.heartbeat(30)  # the HTTP heartbeat resets the deadline (not an addition)
    assert answer["state"] == "waiting_external"
    assert datetime.fromisoformat(answer["timeout_at"]) < r.timeout_at
    answer = call.complete({"via": "http"})
    assert answer == {"job_id": job_id, "callback_id": call.callback_id, "state": "completed"}
    done = stack.client.get_job(job_id)
    assert done is not None and done.state == "completed" and done.result == {"via": "http"}


def test_callback_of_a_cancelled_job_is_not_pending(stack: Stack) -> None:
    job_id, call = manual_job(stack)
    stack.client.cancel(job_id)
    with pytest.raises(CallbackNotPendingError) as e:
        stack.client.complete_external(call.callback_id, {})
    assert e.value.job_state == "cancelled"


def test_handler_exception_fails_the_attempt_retryably(stack: Stack) -> None:
    job = stack.client.enqueue("boom", {}, max_attempts=5)
    stack.calls.wait(job.id)
    retried = wait_state(stack.client, job.id, ("retryable", "failed", "available", "running"))
    wait_for(lambda: (j := stack.client.get_job(job.id)) and j.errors and j, 10, "the error to be recorded")
    after = stack.client.get_job(job.id)
    assert after is not None and after.errors[0]["error"] == "RuntimeError: boom"
    assert after.state != "failed" and retried.attempt >= 1
    stack.client.cancel(job.id)

    last = stack.client.enqueue("boom", {}, max_attempts=1)
    done = wait_state(stack.client, last.id, ("failed",))
    assert done.errors[-1]["error"] == "RuntimeError: boom"


def test_resume_external_versus_complete_external(stack: Stack) -> None:
    """resume hands the payload to the in-process handler that waits (the job runs on); complete
    finishes the job (the waiting handler's result is discarded)."""
    resumed = stack.client.enqueue("wait", {})
    event = stack.worker.wait_line(
        lambda ln: (v := json_key("waiting")(ln)) and v["waiting"] == resumed.id and v, 15, "the handler to wait"
    )
    wait_state(stack.client, resumed.id, ("waiting_external",))
    r = stack.client.resume_external(event["callback_id"], {"answer": 42})
    assert (r.job_id, r.state) == (resumed.id, "running")
    done = wait_state(stack.client, resumed.id, ("completed", "failed", "retryable"))
    assert done.state == "completed" and done.result == {"resumed": {"answer": 42}}
    with pytest.raises(CallbackNotPendingError):
        stack.client.resume_external(event["callback_id"], {"answer": 43})

    completed = stack.client.enqueue("wait", {})
    event = stack.worker.wait_line(
        lambda ln: (v := json_key("waiting")(ln)) and v["waiting"] == completed.id and v, 15, "the handler to wait"
    )
    wait_state(stack.client, completed.id, ("waiting_external",))
    r = stack.client.complete_external(event["callback_id"], {"from": "outside"})
    assert r.state == "completed"
    job = stack.client.get_job(completed.id)
    assert job is not None and job.state == "completed" and job.result == {"from": "outside"}


def test_function_endpoint_refuses_bad_requests() -> None:
    """The helper's own checks, before any job: 400, 401, 404, 405."""
    with FunctionEndpoint({"k": lambda call: None}, secret=SECRET, port=0).start() as endpoint:
        cb = str(uuid.uuid4())
        good = {
            "job_id": 1,
            "kind": "k",
            "args": {},
            "attempt": 1,
            "max_attempts": 1,
            "callback_id": cb,
            "callback_url": "http://127.0.0.1:9/cb/complete",
        }

        def status(body: Any, headers: dict[str, str] | None = None, method: str = "POST") -> int:
            data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
            req = urllib.request.Request(endpoint.url + "/", data=data, headers=headers or {}, method=method)
            try:
                with urllib.request.urlopen(req, timeout=60) as res:
                    return int(res.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        assert status(b"not json") == 400
        assert status({**good, "callback_id": "nope"}, {"X-Service-Signature": sign(SECRET, "nope")}) == 400
        assert status(good) == 401
        assert status(good, {"X-Service-Signature": "0" * 64}) == 401
        assert status({**good, "kind": "other"}, {"X-Service-Signature": sign(SECRET, cb)}) == 404
        assert status(None, method="GET") == 405

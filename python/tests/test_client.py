"""The client on the real PostgreSQL, on both storage engines: enqueue (transactional, many, unique),
read, list, cancel, retry, and bad input that writes nothing."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import psycopg
import pytest
from conftest import DATABASE_URL, REPO, count_jobs

from svc_queue import (
    CallbackNotFoundError,
    Client,
    EnqueueItem,
    InvalidStateError,
    JobNotFoundError,
    Unique,
    UniqueConflictError,
    ValidationError,
)


def test_enqueue_defaults_and_get_job(client: Client) -> None:
    job = client.enqueue("send_email", {"to": "a@example.com", "n": 1.5})
    assert job.id >= 1 and job.kind == "send_email" and job.queue == "default"
    assert job.state == "available" and job.priority == 2 and job.max_attempts == 25 and job.attempt == 0
    assert job.args == {"to": "a@example.com", "n": 1.5} and job.tags == [] and job.metadata == {}
    assert job.duplicate is False and job.unique_key is None
    assert job.run_at.tzinfo is not None and abs(job.created_at - datetime.now(timezone.utc)) < timedelta(minutes=1)
    got = client.get_job(job.id)
    assert got is not None
    assert (got.id, got.kind, got.state, got.args, got.run_at) == (job.id, job.kind, job.state, job.args, job.run_at)
    assert client.get_job(job.id + 1000) is None


def test_enqueue_options(client: Client) -> None:
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    job = client.enqueue(
        "report",
        {"day": "2026-11-23"},
        queue="reports.v2",
        priority=1,
        run_at=at,
        max_attempts=3,
        tags=["nightly", "b"],
        metadata={"by": "test"},
        traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    )
    assert job.state == "scheduled" and job.queue == "reports.v2" and job.priority == 1
    assert job.max_attempts == 3 and job.tags == ["nightly", "b"] and job.metadata == {"by": "test"}
    assert abs(job.run_at - at) < timedelta(milliseconds=1)
    string_time = client.enqueue("report", run_at="2030-01-02T03:04:05.5+01:00")
    assert string_time.run_at == datetime(2030, 1, 2, 2, 4, 5, 500000, tzinfo=timezone.utc)


def test_enqueue_in_a_rolled_back_transaction_leaves_nothing(client: Client, schema: str) -> None:
    with psycopg.connect(DATABASE_URL) as conn:
        job = client.enqueue("audit", {"n": 1}, conn=conn)
        jobs = client.enqueue_many([{"kind": "audit", "args": {"n": 2}}, {"kind": "audit"}], conn=conn)
        assert len(jobs) == 2
        # visible inside the transaction, not outside it
        row = conn.execute(f'select "{schema}".get_job(%s)', (job.id,)).fetchone()
        assert row is not None and row[0]["id"] == job.id
        assert client.get_job(job.id) is None
        conn.rollback()
    assert client.get_job(job.id) is None
    assert count_jobs(schema) == 0

    with pytest.raises(RuntimeError):
        with client.connection() as conn:
            client.enqueue("audit", {"n": 3}, conn=conn)
            raise RuntimeError("the caller's work failed")
    assert count_jobs(schema) == 0

    with psycopg.connect(DATABASE_URL) as conn:
        kept = client.enqueue("audit", {"n": 4}, conn=conn)
        conn.commit()
    with client.connection() as conn:
        also = client.enqueue("audit", {"n": 5}, conn=conn)
    assert [j.id for j in client.list_jobs().jobs] == [also.id, kept.id]


def test_enqueue_many_keeps_order(client: Client) -> None:
    jobs = client.enqueue_many(
        [{"kind": "k", "args": {"i": i}, "priority": 1 + i % 4, "queue": f"q{i % 2}"} for i in range(7)]
    )
    assert [j.args["i"] for j in jobs] == list(range(7))
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)
    assert [j.priority for j in jobs] == [1 + i % 4 for i in range(7)]
    assert client.enqueue_many([]) == []


def test_limit_key_is_carried(client: Client, schema: str) -> None:
    key = "tenant-" + "é" * 248  # 255 characters (more bytes)
    job = client.enqueue("charge", {"n": 1}, limit_key=key)
    assert job.limit_key == key
    none = client.enqueue("charge", {"n": 2})
    assert none.limit_key is None
    later = client.enqueue("charge", {"n": 3}, limit_key="acct-9", run_at=datetime.now(timezone.utc) + timedelta(hours=1))
    assert later.state == "scheduled" and later.limit_key == "acct-9"
    many = client.enqueue_many([{"kind": "charge", "limit_key": "acct-1"}, {"kind": "charge"}])
    assert [j.limit_key for j in many] == ["acct-1", None]
    got = client.get_job(job.id)
    assert got is not None and got.limit_key == key
    listed = {j.id: j.limit_key for j in client.list_jobs(kind="charge").jobs}
    assert listed == {job.id: key, none.id: None, later.id: "acct-9", many[0].id: "acct-1", many[1].id: None}
    # a cancel and a retry keep it
    assert client.cancel(later.id).limit_key == "acct-9"
    assert client.retry(later.id).limit_key == "acct-9"
    # the SQL API's own validation, for callers that skip this client's
    with psycopg.connect(DATABASE_URL) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="limit_key must be a string of 1 to 255"):
            conn.execute(f'select * from "{schema}".enqueue(%s, %s::jsonb, %s::jsonb)', ("k", "{}", json.dumps({"limit_key": ""})))
        conn.rollback()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="limit_key must be a string of 1 to 255"):
            conn.execute(f'select * from "{schema}".enqueue(%s, %s::jsonb, %s::jsonb)', ("k", "{}", json.dumps({"limit_key": 5})))


def test_unique_jobs(client: Client, schema: str) -> None:
    first = client.enqueue("sync", {"user": 7}, unique=True)
    assert first.unique_key and not first.duplicate
    again = client.enqueue("sync", {"user": 7}, unique=Unique())
    assert again.duplicate and again.id == first.id and again.unique_key == first.unique_key
    # floats written as JavaScript writes them: 7.0 is 7, so a TypeScript producer's key is the same
    assert client.enqueue("sync", {"user": 7.0}, unique=True).id == first.id
    other = client.enqueue("sync", {"user": 8}, unique=True)
    assert not other.duplicate and other.id != first.id

    with pytest.raises(UniqueConflictError) as e:
        client.enqueue("sync", {"user": 7}, unique=True, on_conflict="error")
    assert e.value.existing_job_id == first.id and e.value.unique_key == first.unique_key
    assert e.value.code == "unique_conflict"

    # by kind only, by queue, by period
    by_kind = client.enqueue("digest", {"a": 1}, unique={"by_args": False})
    assert client.enqueue("digest", {"a": 2}, unique={"by_args": False}).id == by_kind.id
    q1 = client.enqueue("digest", {"a": 1}, queue="one", unique=Unique(by_queue=True))
    q2 = client.enqueue("digest", {"a": 1}, queue="two", unique=Unique(by_queue=True))
    assert q1.id != q2.id and not q2.duplicate
    hour = Unique(period_ms=3_600_000)
    at = datetime(2030, 5, 1, 10, 15, tzinfo=timezone.utc)
    p1 = client.enqueue("hourly", {}, run_at=at, unique=hour)
    assert client.enqueue("hourly", {}, run_at=at + timedelta(minutes=40), unique=hour).id == p1.id
    assert client.enqueue("hourly", {}, run_at=at + timedelta(minutes=50), unique=hour).id != p1.id

    # a batch with a conflict (on_conflict="error") writes none of its jobs
    before = count_jobs(schema)
    with pytest.raises(UniqueConflictError):
        client.enqueue_many(
            [{"kind": "fresh", "args": {}}, {"kind": "sync", "args": {"user": 7}, "unique": True, "on_conflict": "error"}]
        )
    assert count_jobs(schema) == before

    # in the caller's transaction the conflict leaves the transaction usable
    with client.connection() as conn:
        with pytest.raises(UniqueConflictError):
            client.enqueue("sync", {"user": 7}, unique=True, on_conflict="error", conn=conn)
        client.enqueue("after_conflict", {}, conn=conn)
    assert client.list_jobs(kind="after_conflict").jobs

    # once the job is finished its key is free again
    client.cancel(first.id)
    fresh = client.enqueue("sync", {"user": 7}, unique=True)
    assert not fresh.duplicate and fresh.id != first.id


UNIQUE_VECTORS = json.loads((REPO / "tests" / "fixtures" / "vectors" / "unique_keys.json").read_text())["cases"]


def test_unique_key_vectors(client: Client) -> None:
    """Every vector through the SQL unique_key() and through enqueue's unique options."""
    assert UNIQUE_VECTORS
    for case in UNIQUE_VECTORS:
        key = client.unique_key(case["kind"], case["args"], case["queue"], case["period_ms"], case["run_at"])
        assert key == case["key"], case["name"]
        job = client.enqueue(
            case["kind"],
            case["args"] if case["args"] is not None else {"ignored": True},
            queue=case["queue"] or "default",
            run_at=case["run_at"],
            unique=Unique(
                by_args=case["args"] is not None, by_queue=case["queue"] is not None, period_ms=case["period_ms"]
            ),
        )
        assert job.unique_key == case["key"], case["name"]


def test_list_jobs_filters_and_cursor(client: Client) -> None:
    a = client.enqueue("alpha", {"city": "Oslo"}, tags=["x"])
    b = client.enqueue("beta", {"city": "Bergen"}, queue="other")
    c = client.enqueue("alpha", {"city": "Tromsø"}, tags=["x", "y"])
    client.cancel(b.id)
    assert [j.id for j in client.list_jobs().jobs] == [c.id, b.id, a.id]
    assert [j.id for j in client.list_jobs(kind="alpha").jobs] == [c.id, a.id]
    assert [j.id for j in client.list_jobs(queue="other").jobs] == [b.id]
    assert [j.id for j in client.list_jobs(tag="y").jobs] == [c.id]
    assert [j.id for j in client.list_jobs(q="oslo").jobs] == [a.id]
    assert [j.id for j in client.list_jobs(state="cancelled").jobs] == [b.id]
    assert [j.id for j in client.list_jobs(state=["available", "cancelled"]).jobs] == [c.id, b.id, a.id]
    page = client.list_jobs(limit=2)
    assert [j.id for j in page.jobs] == [c.id, b.id] and page.next_cursor
    rest = client.list_jobs(limit=2, cursor=page.next_cursor)
    assert [j.id for j in rest.jobs] == [a.id] and rest.next_cursor is None
    with pytest.raises(ValidationError, match="unknown job state"):
        client.list_jobs(state="done")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="invalid cursor"):
        client.list_jobs(cursor="bm9wZQ")
    with pytest.raises(ValidationError, match="limit"):
        client.list_jobs(limit=0)


def test_cancel_and_retry(client: Client) -> None:
    job = client.enqueue("k", {})
    with pytest.raises(InvalidStateError, match="only a completed, failed or cancelled job can be retried"):
        client.retry(job.id)
    cancelled = client.cancel(job.id)
    assert cancelled.state == "cancelled" and cancelled.finalized_at is not None
    with pytest.raises(InvalidStateError, match="only a job that has not finished can be cancelled") as e:
        client.cancel(job.id)
    assert e.value.code == "invalid_state"
    retried = client.retry(job.id)
    assert retried.state == "available" and retried.attempt == 0
    with pytest.raises(JobNotFoundError) as nf:
        client.cancel(job.id + 1000)
    assert nf.value.job_id == job.id + 1000 and nf.value.code == "not_found"
    with pytest.raises(JobNotFoundError):
        client.retry(job.id + 1000)
    for bad in [0, -1, True, "1", 1.0, None]:
        with pytest.raises(ValidationError, match="job id must be a positive integer"):
            client.get_job(bad)  # type: ignore[arg-type]


def deep(levels: int) -> dict[str, Any]:
    v: Any = 0
    for _ in range(levels - 1):
        v = [v]
    return {"d": v}


BAD_ENQUEUES: list[tuple[str, dict[str, Any], str]] = [
    ("args a list", {"args": [1, 2]}, "args of k must be a JSON object"),
    ("args a string", {"args": "{}"}, "args of k must be a JSON object"),
    ("priority 9", {"priority": 9}, "priority must be an integer from 1 .highest. to 4, got 9"),
    ("priority 0", {"priority": 0}, "priority must be"),
    ("priority a bool", {"priority": True}, "priority must be"),
    ("priority a float", {"priority": 2.0}, "priority must be"),
    ("max_attempts 0", {"max_attempts": 0}, "max_attempts must be an integer from 1 to 1000"),
    ("max_attempts 1001", {"max_attempts": 1001}, "max_attempts"),
    ("queue name", {"queue": "a b"}, "invalid queue name"),
    ("queue too long", {"queue": "q" * 49}, "invalid queue name"),
    ("kind empty", {"kind": ""}, "kind must be a non-empty string"),
    ("kind NUL", {"kind": "a\0b"}, "NUL"),
    ("args NUL", {"args": {"s": "a\0"}}, "U\\+0000"),
    ("key NUL", {"args": {"a\0": 1}}, "U\\+0000"),
    ("lone surrogate", {"args": {"s": "\ud800"}}, "lone surrogate"),
    ("too deep", {"args": deep(513)}, "nested deeper than 512"),
    ("big int", {"args": {"n": 2**53 + 1}}, "would be read as 9007199254740992"),
    ("huge int", {"args": {"n": 10**400}}, "out of the range"),
    ("NaN", {"args": {"n": float("nan")}}, "not a JSON number"),
    ("infinity", {"args": {"n": float("inf")}}, "not a JSON number"),
    ("not JSON", {"args": {"n": {1, 2}}}, "must be JSON-serializable"),
    ("int key", {"args": {1: "a"}}, "keys must be strings"),
    ("metadata list", {"metadata": [1]}, "metadata must be a JSON object"),
    ("tags string", {"tags": "a"}, "tags must be a list of strings"),
    ("tags int", {"tags": [1]}, "tags must be a list of strings"),
    ("run_at naive", {"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
    ("run_at impossible", {"run_at": "2026-02-31T00:00:00Z"}, "not a date that exists"),
    ("run_at no zone", {"run_at": "2026-02-01T00:00:00"}, "RFC 3339"),
    ("run_at number", {"run_at": 1700000000}, "run_at must be a datetime"),
    ("unique period", {"unique": {"period_ms": 0}}, "period_ms"),
    ("unique unknown", {"unique": {"by_kind": True}}, "unique takes"),
    ("on_conflict", {"on_conflict": "ignore"}, 'on_conflict must be "return" or "error"'),
    ("traceparent", {"traceparent": "nope"}, "traceparent"),
    ("limit_key empty", {"limit_key": ""}, "limit_key must be a string of 1 to 255 characters, got 0 characters"),
    ("limit_key 256", {"limit_key": "k" * 256}, "limit_key must be a string of 1 to 255 characters, got 256"),
    ("limit_key int", {"limit_key": 7}, "limit_key must be a string of 1 to 255 characters, got int"),
    ("limit_key NUL", {"limit_key": "a\0"}, "limit_key contains U\\+0000"),
]


def test_bad_input_raises_and_writes_nothing(client: Client, schema: str) -> None:
    for name, opts, message in BAD_ENQUEUES:
        item: dict[str, Any] = {"kind": "k", **opts}
        kind = item.pop("kind")
        args = item.pop("args", None)
        with pytest.raises(ValidationError, match=message) as e:
            client.enqueue(kind, args, **item)
        assert e.value.code == "invalid_request" and isinstance(e.value, ValueError), name
        with pytest.raises(ValidationError, match=message):
            client.enqueue_many([{"kind": "fine"}, cast(EnqueueItem, {"kind": "k", **opts})])
    assert count_jobs(schema) == 0


def test_deep_but_allowed_json(client: Client) -> None:
    job = client.enqueue("k", deep(512))  # 512 levels, the args object included
    assert job.args == deep(512)
    assert client.enqueue("k", {"n": 2**53, "m": -(2**53), "f": 0.1}).args == {"n": 2**53, "m": -(2**53), "f": 0.1}


def test_malformed_callback_id_raises_and_writes_nothing(client: Client, schema: str) -> None:
    job = client.enqueue("k", {})
    for bad in ["", "not-a-uuid", "550e8400-e29b-41d4-a716-44665544000", "{550e8400-e29b-41d4-a716-446655440000}", None, 42]:
        for call in (
            lambda: client.complete_external(bad, {"x": 1}),  # type: ignore[arg-type]
            lambda: client.resume_external(bad),  # type: ignore[arg-type]
            lambda: client.fail_external(bad, "e"),  # type: ignore[arg-type]
            lambda: client.heartbeat_external(bad, 60),  # type: ignore[arg-type]
        ):
            with pytest.raises(ValidationError, match="callback id must be a UUID"):
                call()
    with pytest.raises(CallbackNotFoundError):
        client.complete_external(uuid.uuid4(), {"x": 1})  # a uuid.UUID is taken as well
    after = client.get_job(job.id)
    assert after is not None and after.state == "available" and after.result is None
    assert count_jobs(schema) == 1


def test_job_errors_split_message_and_stack() -> None:
    """An attempt's error is stored as the message, U+001E, then the stack (as the TypeScript worker writes
    it); reads give ``error`` and ``stack`` apart, and a rescued attempt gets the leader's account."""
    from svc_queue.client import _job_from_json

    base = {
        "id": 1, "kind": "k", "queue": "default", "args": {}, "state": "failed", "priority": 2,
        "attempt": 2, "max_attempts": 2, "run_at": "2026-01-01T00:00:00.000Z",
        "created_at": "2026-01-01T00:00:00.000Z", "lease": 2,
    }
    job = _job_from_json({**base, "errors": [
        {"attempt": 1, "at": "2026-01-01T00:00:01.000Z", "error": "boom\x1eError: boom\n    at h (a.ts:1:1)"},
        {"attempt": 2, "at": "2026-01-01T00:00:02.000Z", "error": "rescued: heartbeat stale", "terminal": True},
        {"attempt": 3, "at": "2026-01-01T00:00:03.000Z", "error": "plain"},
    ]})
    assert job.errors[0] == {
        "attempt": 1, "at": "2026-01-01T00:00:01.000Z", "error": "boom", "stack": "Error: boom\n    at h (a.ts:1:1)",
    }
    assert job.errors[1]["error"] == "rescued: heartbeat stale"
    assert job.errors[1]["stack"].startswith("the leader rescued this attempt (heartbeat stale)")
    assert "stack" not in job.errors[2]

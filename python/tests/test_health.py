"""health_check(): the same report as `svc health --json`, with 0 and 1 live workers, unmigrated and
unreachable."""

from __future__ import annotations

import json
import socket

import pytest

from conftest import DATABASE_URL, drop_schema, fresh_schema, run_cli, start_ts_worker, wait_for

from svc_queue import EXPECTED_SCHEMA_VERSION, Client, ConnectTimeoutError


def not_ready(**fields: object) -> dict[str, object]:
    """The report of a cluster that is not ready: nothing known beyond ``fields``."""
    return {
        "ready": False,
        "postgres": "connected",
        "schema_version": None,
        "expected_schema_version": EXPECTED_SCHEMA_VERSION,
        "storage": "unknown",
        "storage_transition": "unknown",
        "live_runtimes": 0,
        "unhealthy_runtimes": 0,
        "pooler": "none",
        **fields,
    }


def cli_health(schema: str) -> dict[str, object]:
    r = run_cli("health", "--json", schema=schema)
    report: dict[str, object] = json.loads(r.stdout)
    return report


def test_health_with_no_worker_matches_svc_health(client: Client, schema: str, engine: str) -> None:
    report = client.health_check()
    assert report == not_ready(
        ready=True,
        schema_version=EXPECTED_SCHEMA_VERSION,
        storage=engine,
        storage_transition="active" if engine == "queue_storage" else "canonical",
    )
    assert report == cli_health(schema)


def test_health_with_one_live_worker(client: Client, schema: str) -> None:
    worker, _ = start_ts_worker(schema)
    try:
        # live from its first heartbeat; healthy once it reported itself ready (its loops ticked)
        report = wait_for(
            lambda: (r := client.health_check())["live_runtimes"] == 1 and r["unhealthy_runtimes"] == 0 and r,
            20,
            "the worker to count as live and healthy",
        )
        assert report["ready"] is True
        assert "reason" not in report
        assert cli_health(schema) == report
    finally:
        worker.stop()
    # a worker that shut down removes its runtime row
    assert client.health_check()["live_runtimes"] == 0


def test_health_of_an_unmigrated_schema() -> None:
    schema = fresh_schema()
    try:
        with Client(DATABASE_URL, schema=schema, max_connections=1) as client:
            report = client.health_check()
        assert report == not_ready(reason="svc schema not installed: run `svc migrate`")
        assert cli_health(schema) == report
    finally:
        drop_schema(schema)  # nothing was created; dropped anyway in case


def test_health_of_an_unreachable_database() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"postgres://postgres@127.0.0.1:{port}/postgres", schema="svc", connect_timeout=2) as client:
        report = client.health_check()
        with pytest.raises(ConnectTimeoutError, match=f"no PostgreSQL answered at 127.0.0.1:{port} within 2 s"):
            client.enqueue("k", {})
    reason = report.pop("reason")  # type: ignore[misc]
    assert report == not_ready(postgres="unreachable")
    assert reason.startswith("database unreachable (") and "check the database URL" in reason
    assert "refused" in reason.lower() or "connect" in reason.lower()

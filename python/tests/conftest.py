"""Fixtures of the Python client's tests: each test works in a fresh schema of the real PostgreSQL,
migrated by the repository's own migrations (`client.migrate`, as `svc migrate` runs it; one Deno process
migrates a batch of schemas for the tests to take) with the storage engine under test, and dropped
afterwards (also on failure). Engines: SVC_TEST_ENGINE (`canonical` or `queue_storage`), else both.
Database: TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg
import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent

try:  # the installed package (CI); else the sources beside the tests
    import svc_queue
except ImportError:
    sys.path.insert(0, str(PYTHON_DIR))
    import svc_queue

from svc_queue import Client, Job  # noqa: E402

# Child Python processes (the example) import the same svc_queue as the tests.
PACKAGE_PATH = str(Path(svc_queue.__file__).resolve().parents[1])

DATABASE_URL = os.environ.get("TEST_DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"
ENGINES = [os.environ["SVC_TEST_ENGINE"]] if os.environ.get("SVC_TEST_ENGINE") else ["canonical", "queue_storage"]


def deno() -> list[str]:
    """The Deno command: SVC_DENO (e.g. `npx --yes deno@2.9.6`), else `deno` on PATH, else npx's."""
    if os.environ.get("SVC_DENO"):
        return shlex.split(os.environ["SVC_DENO"])
    found = shutil.which("deno")
    return [found] if found else ["npx", "--yes", "deno@2.9.6"]


def fresh_schema() -> str:
    return f"svct_py_{uuid.uuid4().hex[:12]}"


def run_cli(*args: str, schema: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs `svc` (cli.ts) on the test database and a schema."""
    return subprocess.run(
        [*deno(), "run", "-A", str(REPO / "cli.ts"), "--database-url", DATABASE_URL, "--schema", schema, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )


def migrate(schema: str, engine: str) -> None:
    r = run_cli("migrate", "--engine", engine, schema=schema)
    if r.returncode != 0:
        raise RuntimeError(f"svc migrate failed ({r.returncode}): {r.stdout}\n{r.stderr}")


def drop_schema(schema: str) -> None:
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute("set client_min_messages = warning")
        conn.execute(f'drop schema if exists "{schema}_qs" cascade')
        conn.execute(f'drop schema if exists "{schema}" cascade')


def count_jobs(schema: str) -> int:
    """Every job the schema holds, on both engines."""
    with psycopg.connect(DATABASE_URL) as conn:
        row = conn.execute(
            f'select (select count(*) from "{schema}".jobs) + (select count(*) from "{schema}_qs".jobs)'
        ).fetchone()
    assert row is not None
    return int(row[0])


WAIT_FLOOR_S = 60.0


def wait_for(fn: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Polls ``fn`` until it returns something truthy.

    Waits at least 60 s before it fails, whatever ``timeout`` says (as the Deno tests' ``waitFor``): no test
    expects a wait to time out, and a slow or loaded machine must not fail a test by time alone.
    """
    timeout = max(timeout, WAIT_FLOOR_S)
    until = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > until:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def wait_state(client: Client, job_id: int, states: tuple[str, ...], timeout: float = 15.0) -> Job:
    def probe() -> Job | None:
        job = client.get_job(job_id)
        return job if job is not None and job.state in states else None

    job: Job = wait_for(probe, timeout, f"job {job_id} to be {' or '.join(states)}")
    return job


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# Migrated schemas waiting for a test, per engine. A Deno process migrates POOL_BATCH of them at a time
# (fixtures/migrate_schemas.ts): one process start per test cost more than most tests on a slow machine. The
# ones no test took are dropped at the end of the session.
POOL_BATCH = 8
_pool: dict[str, list[str]] = {}


def pooled_schema(engine: str) -> str:
    """A fresh schema migrated with ``engine``, from the pool (refilled by one Deno process when empty)."""
    waiting = _pool.setdefault(engine, [])
    if not waiting:
        names = [fresh_schema() for _ in range(POOL_BATCH)]
        try:
            r = subprocess.run(
                [*deno(), "run", "-A", str(PYTHON_DIR / "tests" / "fixtures" / "migrate_schemas.ts"), DATABASE_URL,
                 engine, *names],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "NO_COLOR": "1"},
            )
            if r.returncode != 0:
                raise RuntimeError(f"migrating the test schemas failed ({r.returncode}): {r.stdout}\n{r.stderr}")
        except BaseException:
            for name in names:  # also on a timeout: none is left behind half-migrated
                drop_schema(name)
            raise
        waiting.extend(line.split(" ", 1)[1] for line in r.stdout.splitlines() if line.startswith("migrated "))
    return waiting.pop()


@pytest.fixture(scope="session", autouse=True)
def _drop_pooled_schemas() -> Iterator[None]:
    yield
    for names in _pool.values():
        for name in names:
            drop_schema(name)
        names.clear()


@pytest.fixture
def schema(engine: str) -> Iterator[str]:
    """A fresh schema migrated with the engine under test; dropped afterwards."""
    name = pooled_schema(engine)
    try:
        yield name
    finally:
        drop_schema(name)


@pytest.fixture
def client(schema: str) -> Iterator[Client]:
    with Client(DATABASE_URL, schema=schema, max_connections=4) as c:
        yield c


class Process:
    """A child process whose stdout lines are collected as they come; stopped with SIGTERM."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path = REPO) -> None:
        self.lines: list[str] = []
        self.stderr: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            args,
            cwd=cwd,
            env={**os.environ, "NO_COLOR": "1", **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._cond:
                into.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_line(self, pred: Callable[[str], Any], timeout: float = 30.0, what: str = "a line") -> Any:
        """The first truthy ``pred(line)`` of stdout, waiting for it (at least 60 s, as ``wait_for``)."""
        timeout = max(timeout, WAIT_FLOOR_S)
        until = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    v = pred(line)
                    if v:
                        return v
                left = until - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reading()):
                    raise AssertionError(
                        f"timed out waiting for {what}; exit {self.proc.poll()}\n"
                        f"stdout: {self.lines[-20:]}\nstderr: {self.stderr[-20:]}"
                    )
                self._cond.wait(min(left, 0.2))

    def _reading(self) -> bool:
        return any(t.is_alive() for t in self._readers)

    def json_events(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict):
                out.append(v)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for t in self._readers:
            t.join(5)


def json_key(key: str) -> Callable[[str], Any]:
    """A ``wait_line`` predicate: the JSON object of a line that has ``key``."""

    def pred(line: str) -> Any:
        try:
            v = json.loads(line)
        except ValueError:
            return None
        return v if isinstance(v, dict) and key in v else None

    return pred


def start_ts_worker(schema: str, http_workers: dict[str, str] | None = None, secret_hex: str | None = None) -> tuple[Process, dict[str, Any]]:
    """The TypeScript worker of tests/fixtures/http_worker.ts on ``schema``; returns it and its start line."""
    env = {"DATABASE_URL": DATABASE_URL, "SVC_SCHEMA": schema, "HTTP_WORKERS": json.dumps(http_workers or {})}
    if secret_hex:
        env["SECRET_HEX"] = secret_hex
    p = Process([*deno(), "run", "-A", str(PYTHON_DIR / "tests" / "fixtures" / "http_worker.ts")], env)
    try:
        started = p.wait_line(json_key("started"), 60, "the TypeScript worker to start")
    except BaseException:
        p.stop()
        raise
    return p, started


def start_example(secret_hex: str | None) -> tuple[Process, str]:
    """python/examples/function_endpoint.py on a free port; returns it and its URL."""
    env = {"PORT": "0", "PYTHONUNBUFFERED": "1"}
    if secret_hex:
        env["SERVICE_CALLBACK_HMAC_SECRET"] = secret_hex
    env["PYTHONPATH"] = os.pathsep.join(p for p in [PACKAGE_PATH, os.environ.get("PYTHONPATH")] if p)
    p = Process([sys.executable, str(PYTHON_DIR / "examples" / "function_endpoint.py")], env)
    try:
        url = p.wait_line(
            lambda line: line.split("listening on ", 1)[1] if line.startswith("listening on ") else None,
            30,
            "the example to listen",
        )
    except BaseException:
        p.stop()
        raise
    return p, url

"""Through a real PgBouncer in transaction mode (Debian's ``pgbouncer``, started here on a free port in front
of the test database): the client never prepares a statement, so the same statements run many times over
few server connections; health says the connection goes through a pooler. The mode's resolution too."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pytest

from conftest import DATABASE_URL
from svc_queue import Client, ValidationError
from svc_queue.client import resolve_pooler


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bouncer_url() -> Iterator[str]:
    """PgBouncer (transaction mode, 2 server connections) in front of the test database; its URL."""
    binary = next((p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).is_file()), None)
    if binary is None:
        pytest.fail("pgbouncer is not installed (apt-get install pgbouncer)")
    target = urlsplit(DATABASE_URL)
    user = target.username or "postgres"
    database = target.path.lstrip("/") or "postgres"
    d = Path(tempfile.mkdtemp(prefix="svc_py_pgbouncer_", dir="/tmp"))
    d.chmod(0o777)
    port = _free_port()
    server = f"host={target.hostname} port={target.port or 5432} user={user}"
    (d / "pgbouncer.ini").write_text(
        "\n".join([
            "[databases]",
            f"{database} = {server} dbname={database}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = any",
            "pool_mode = transaction",
            "default_pool_size = 2",
            f"logfile = {d}/pgbouncer.log",
        ]) + "\n"
    )
    (d / "pgbouncer.ini").chmod(0o644)
    args = [binary, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(d / "pgbouncer.ini")]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.05)
        yield f"postgresql://{user}@127.0.0.1:{port}/{database}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)


def test_pooler_mode_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVICE_POOLER", raising=False)
    assert resolve_pooler("postgresql://u@db:5432/x") == "none"
    assert resolve_pooler("postgresql://u@db:6432/x") == "transaction"
    assert resolve_pooler("postgresql://u@db:6432/x", "none") == "none"
    assert resolve_pooler("postgresql://u@aws-0-eu.pooler.supabase.com:6543/postgres") == "transaction"
    assert resolve_pooler("postgresql://u@aws-0-eu.pooler.supabase.com:5432/postgres") == "none"
    assert resolve_pooler("postgresql://u@ep-x-123-pooler.eu-central-1.aws.neon.tech/db") == "transaction"
    monkeypatch.setenv("SERVICE_POOLER", "transaction")
    assert resolve_pooler("postgresql://u@db:5432/x") == "transaction"
    monkeypatch.setenv("SERVICE_POOLER", "session")
    with pytest.raises(ValidationError, match='SERVICE_POOLER must be "transaction" or "none"'):
        resolve_pooler("postgresql://u@db:5432/x")
    with pytest.raises(ValidationError, match='pooler must be "transaction" or "none"'):
        Client("postgresql://u@db:5432/x", pooler="session")


def test_through_pgbouncer_in_transaction_mode(bouncer_url: str, schema: str) -> None:
    with Client(bouncer_url, schema, max_connections=8, pooler="transaction") as client:
        assert client.pooler == "transaction"
        errors: list[BaseException] = []

        # 8 threads on 8 client connections over 2 server connections, each statement run far more than
        # psycopg's prepare threshold (5): a prepared statement would be missing on the next server.
        def work(n: int) -> None:
            try:
                for i in range(15):
                    job = client.enqueue("py_pooled", {"n": n, "i": i})
                    assert client.get_job(job.id) is not None
            except BaseException as e:  # noqa: BLE001 (collected and asserted below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        page = client.list_jobs(kind="py_pooled", limit=200)
        assert len(page.jobs) == 120
        # The caller's transaction through the pooler.
        with client.connection() as conn:
            job = client.enqueue("py_in_tx", {}, conn=conn)
        assert client.get_job(job.id) is not None
        report = client.health_check()
        assert report["ready"] is True
        assert report["pooler"] == "transaction"

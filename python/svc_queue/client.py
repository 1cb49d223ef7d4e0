"""The client: enqueue (single, many, in the caller's transaction), read, cancel, retry, external
completion of callbacks, and the cluster's health.

It talks to the database only through the stable SQL functions of the svc schema (``enqueue``,
``unique_key``, ``get_job``, ``list_jobs``, ``cancel_job``, ``retry_job``, ``resolve_callback``,
``health``), which route by the storage state: the same client works on both storage engines and
during the transition between them.
"""

from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from types import TracebackType
from uuid import UUID
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence, TypeVar

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from .errors import (
    CallbackNotFoundError,
    CallbackNotPendingError,
    ConnectTimeoutError,
    InvalidStateError,
    JobNotFoundError,
    SvcError,
    UniqueConflictError,
    ValidationError,
)
from .types import JOB_STATES, CallbackResult, ClusterHealth, EnqueueItem, Job, JobPage, JobState, Unique
from .validation import (
    check_callback_id,
    check_job_cursor,
    check_job_id,
    check_json_value,
    check_text,
    json_text,
    parse_rfc3339,
)

__all__ = ["Client", "EXPECTED_SCHEMA_VERSION", "DEFAULT_SCHEMA", "MAX_HEARTBEAT_SECONDS"]

EXPECTED_SCHEMA_VERSION = 17
"""The schema version this client needs (``svc migrate`` installs it); it runs on any newer one too."""

DEFAULT_SCHEMA = "svc"
MAX_HEARTBEAT_SECONDS = 2_592_000
"""Largest ``timeout_seconds`` of a heartbeat (30 days)."""

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
_QUEUE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")
_TRACEPARENT_RE = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_ON_CONFLICT = ("return", "error")
_POOLER_MODES = ("transaction", "none")

Conn = psycopg.Connection[Any]
T = TypeVar("T")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def pooler_from_url(url: str) -> str | None:
    """Why ``url`` goes through a transaction pooler (its host or port is a known pooler's), else None."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return None
    host = str(params.get("host") or "").lower()
    port = str(params.get("port") or "")
    if host.endswith(".pooler.supabase.com") and port == "6543":
        return "Supabase's transaction pooler (port 6543)"
    if re.search(r"-pooler\.", host) and "neon" in host:
        return "Neon's pooled endpoint (-pooler host)"
    if re.search(r"\.proxy-[a-z0-9]+\.", host) and host.endswith(".rds.amazonaws.com"):
        return "an RDS Proxy endpoint"
    if port == "6432":
        return "port 6432 (PgBouncer's)"
    return None


def resolve_pooler(url: str, pooler: str | None = None) -> str:
    """The pooler mode: ``pooler``, else ``SERVICE_POOLER``, else what the URL says, else ``"none"``."""
    if pooler is not None:
        if pooler not in _POOLER_MODES:
            raise ValidationError(f'pooler must be "transaction" or "none", got {pooler!r}')
        return pooler
    env = os.environ.get("SERVICE_POOLER") or None
    if env is not None:
        if env not in _POOLER_MODES:
            raise ValidationError(f'SERVICE_POOLER must be "transaction" or "none", got {env!r}')
        return env
    return "transaction" if pooler_from_url(url) else "none"


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


class Client:
    """A client of one svc schema, over a pool of at most ``max_connections`` connections.

    Connections open lazily on first use. Use it as a context manager, or call :meth:`close`.

    ``database_url`` defaults to the environment variable ``DATABASE_URL``. ``connect_timeout`` (seconds)
    bounds the wait for a connection; ``heartbeat_interval`` (seconds) is the workers' heartbeat
    interval, for counting live runtimes in :meth:`health_check` (live: heartbeated within three).
    ``pooler`` is ``"transaction"`` when the URL goes through a transaction pooler (PgBouncer in transaction
    mode, Supavisor, Neon's pooled endpoint, RDS Proxy): statements are then never prepared. Default: the
    environment variable ``SERVICE_POOLER``, else recognised from the URL's host or port, else ``"none"``.
    """

    def __init__(
        self,
        database_url: str | None = None,
        schema: str = DEFAULT_SCHEMA,
        max_connections: int = 10,
        *,
        connect_timeout: float = 10.0,
        heartbeat_interval: float = 30.0,
        pooler: str | None = None,
    ) -> None:
        url = database_url if database_url is not None else os.environ.get("DATABASE_URL") or None
        if not url:
            raise ValidationError("no database URL: pass database_url or set DATABASE_URL")
        if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
            raise ValidationError(
                f"invalid schema name {schema!r}: use 1 to 51 characters of a-z 0-9 _ starting with a letter or _"
            )
        if not _is_int(max_connections) or max_connections < 1:
            raise ValidationError(f"max_connections must be a positive integer, got {max_connections!r}")
        if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
            raise ValidationError("connect_timeout must be a positive number of seconds")
        if not isinstance(heartbeat_interval, (int, float)) or heartbeat_interval <= 0:
            raise ValidationError("heartbeat_interval must be a positive number of seconds")
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            raise ValidationError(f"invalid database URL: {_first_line(e)}") from None
        self._schema = schema
        self._q = f'"{schema}"'
        self._url = url
        self._target = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        self._connect_timeout = float(connect_timeout)
        self._live_ms = int(3 * heartbeat_interval * 1000)
        self._max_connections = max_connections
        self._pooler = resolve_pooler(url, pooler)
        kwargs: dict[str, Any] = {"connect_timeout": max(1, round(self._connect_timeout))}
        if self._pooler == "transaction":
            # psycopg prepares a statement run 5 times on a connection (a named prepared statement), which a
            # transaction pooler does not keep: never prepare.
            kwargs["prepare_threshold"] = None
        self._pool = ConnectionPool(
            url,
            min_size=0,
            max_size=max_connections,
            open=False,
            timeout=self._connect_timeout,
            kwargs=kwargs,
            name=f"svc_queue:{schema}",
        )
        self._opened = False
        self._closed = False
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------------------------------

    @property
    def schema(self) -> str:
        """The svc schema this client works in."""
        return self._schema

    @property
    def max_connections(self) -> int:
        return self._max_connections

    @property
    def pooler(self) -> str:
        """``"transaction"`` when the connections go through a transaction pooler, else ``"none"``."""
        return self._pooler

    def _open_pool(self) -> ConnectionPool:
        with self._lock:
            if self._closed:
                raise SvcError("the client is closed", "closed")
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        return self._pool

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A connection of the pool in a transaction: committed when the block ends, rolled back on an
        exception. Pass it as ``conn=`` to join your own statements::

            with client.connection() as conn:
                conn.execute("insert into orders ...")
                client.enqueue("send_receipt", {"order": 7}, conn=conn)
        """
        pool = self._open_pool()
        try:
            cm = pool.connection(timeout=self._connect_timeout)
            conn = cm.__enter__()
        except PoolTimeout:
            self._raise_unreachable()
            raise
        try:
            yield conn
        except BaseException as e:
            if not cm.__exit__(type(e), e, e.__traceback__):
                raise
        else:
            cm.__exit__(None, None, None)

    def _raise_unreachable(self) -> None:
        """After a pool timeout: a direct connection says whether PostgreSQL is unreachable, and why."""
        try:
            with psycopg.connect(self._url, connect_timeout=max(1, round(self._connect_timeout))):
                pass
        except psycopg.Error as e:
            raise ConnectTimeoutError(self._target, self._connect_timeout, _first_line(e)) from None
        # PostgreSQL answers: the pool was busy (all max_connections in use); the PoolTimeout goes up.

    @contextmanager
    def _use(self, conn: Conn | None) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on the caller's connection (their transaction), or on a pool connection."""
        if conn is not None:
            if not isinstance(conn, psycopg.Connection):
                raise ValidationError("conn must be a psycopg (3) Connection")
            with conn.cursor(row_factory=dict_row) as cur:
                yield cur
        else:
            with self.connection() as c, c.cursor(row_factory=dict_row) as cur:
                yield cur

    def close(self) -> None:
        """Closes the pool (idempotent)."""
        with self._lock:
            self._closed = True
            if self._opened:
                self._pool.close()
                self._opened = False

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(schema={self._schema!r}, target={self._target!r}, max_connections={self._max_connections})"

    # -- enqueue -------------------------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        args: Mapping[str, Any] | None = None,
        *,
        queue: str = "default",
        priority: int = 2,
        run_at: datetime | str | None = None,
        max_attempts: int = 25,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        unique: Unique | Mapping[str, Any] | bool | None = None,
        on_conflict: Literal["return", "error"] = "return",
        traceparent: str | None = None,
        limit_key: str | None = None,
        conn: Conn | None = None,
    ) -> Job:
        """Enqueues one job and returns it.

        ``unique`` makes the job unique by a key over its kind (plus args, queue and time bucket per
        :class:`Unique`): while a job with the same key is unfinished, the existing job comes back with
        ``duplicate=True``, or ``UniqueConflictError`` is raised with ``on_conflict="error"``.
        ``limit_key`` (1 to 255 characters) is the key per-key limits count the job by; the job carries it
        for its whole life (per-key limits are not enforced yet). With ``conn=`` the insert joins the
        caller's transaction (committed or rolled back with it). Invalid input raises ``ValidationError``
        before anything is written.
        """
        item: EnqueueItem = {
            "kind": kind,
            "args": {} if args is None else args,
            "queue": queue,
            "priority": priority,
            "run_at": run_at,
            "max_attempts": max_attempts,
            "tags": tags,
            "metadata": {} if metadata is None else metadata,
            "unique": unique,
            "on_conflict": on_conflict,
            "traceparent": traceparent,
            "limit_key": limit_key,
        }
        return self.enqueue_many([item], conn=conn)[0]

    def enqueue_many(self, items: Iterable[EnqueueItem], *, conn: Conn | None = None) -> list[Job]:
        """Enqueues jobs in one statement, all or none, and returns them in input order.

        Every item is validated before anything is written. Without ``conn`` the jobs commit together
        (a ``UniqueConflictError`` of one item writes none); with ``conn`` they join the caller's
        transaction.
        """
        prepared = [_prepare(item, i) for i, item in enumerate(items)]
        if not prepared:
            return []
        batch = json_text([{"kind": p[0], "args": p[1], "opts": p[2]} for p in prepared])
        with self._use(conn) as cur:
            rows = self._call(
                cur,
                f"select e.* from jsonb_array_elements(%s::jsonb) with ordinality as x(item, ord) "
                f"cross join lateral {self._q}.enqueue(x.item ->> 'kind', x.item -> 'args', x.item -> 'opts') e "
                f"order by x.ord",
                (batch,),
            )
            jobs = [_job_from_row(r) for r in rows]
            for job, p in zip(jobs, prepared):
                if job.duplicate and p[3] == "error":
                    raise UniqueConflictError(job.id, job.unique_key or "")
        return jobs

    def unique_key(
        self,
        kind: str,
        args: Mapping[str, Any] | None = None,
        queue: str | None = None,
        period_ms: int | None = None,
        run_at: datetime | str | None = None,
    ) -> str:
        """The unique key of these parts, as the database's ``unique_key()`` computes it (``None`` leaves
        a part out; ``run_at`` matters only with ``period_ms``, default now)."""
        if not isinstance(kind, str):
            raise ValidationError("kind must be a string")
        check_text("kind", kind)
        args_text = None if args is None else json_text(check_json_value("args", _object("args", args)))
        if queue is not None:
            _check_queue(queue)
        if period_ms is not None and (not _is_int(period_ms) or period_ms < 1):
            raise ValidationError("period_ms must be a positive integer of milliseconds")
        at = _run_at(run_at)
        with self._use(None) as cur:
            rows = self._call(
                cur,
                f"select {self._q}.unique_key(%s, %s::jsonb, %s, %s, coalesce(%s::timestamptz, now())) as k",
                (kind, args_text, queue, period_ms, at),
            )
        return str(rows[0]["k"])

    # -- jobs ----------------------------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        """The job, or ``None`` when there is none with that id."""
        check_job_id(job_id)
        with self._use(None) as cur:
            rows = self._call(cur, f"select {self._q}.get_job(%s) as j", (job_id,))
        j = rows[0]["j"]
        return None if j is None else _job_from_json(j)

    def list_jobs(
        self,
        *,
        state: JobState | Sequence[JobState] | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """Jobs, newest first, with the filters and cursor of ``GET /api/jobs``. ``q`` searches the args
        (case-insensitive); ``limit`` defaults to 100, at most 1000."""
        f: dict[str, Any] = {}
        if state is not None:
            states = [state] if isinstance(state, str) else list(state)
            for s in states:
                if s not in JOB_STATES:
                    raise ValidationError(f"unknown job state {s!r}: use one of {', '.join(JOB_STATES)}")
            f["state"] = states
        for name, value in (("kind", kind), ("queue", queue), ("tag", tag), ("q", q)):
            if value is not None:
                if not isinstance(value, str):
                    raise ValidationError(f"{name} must be a string")
                f[name] = check_text(name, value)
        if limit is not None:
            if not _is_int(limit) or limit < 1:
                raise ValidationError(f"limit must be a positive integer, got {limit!r}")
            f["limit"] = min(limit, 1000)
        if cursor is not None:
            f["cursor"] = check_job_cursor(cursor)
        with self._use(None) as cur:
            rows = self._call(cur, f"select {self._q}.list_jobs(%s::jsonb) as p", (json_text(f),))
        page = rows[0]["p"]
        return JobPage(jobs=[_job_from_json(j) for j in page["jobs"]], next_cursor=page.get("next_cursor"))

    def cancel(self, job_id: int) -> Job:
        """Cancels an unfinished job (``InvalidStateError`` for a finished one, ``JobNotFoundError``)."""
        check_job_id(job_id)
        with self._use(None) as cur:
            rows = self._call(cur, f"select {self._q}.cancel_job(%s) as j", (job_id,), job_id)
        return _job_from_json(rows[0]["j"])

    def retry(self, job_id: int) -> Job:
        """Runs a completed, failed or cancelled job again (``InvalidStateError`` for an unfinished one)."""
        check_job_id(job_id)
        with self._use(None) as cur:
            rows = self._call(cur, f"select {self._q}.retry_job(%s) as j", (job_id,), job_id)
        return _job_from_json(rows[0]["j"])

    # -- external completion -------------------------------------------------------------------------

    def resume_external(self, callback_id: str | UUID, payload: Any = None) -> CallbackResult:
        """Resumes an in-process handler waiting on the callback: the job goes back to ``running`` and
        the handler's ``waitForCallback`` returns ``payload``."""
        return self._resolve(callback_id, "resume", payload=payload)

    def complete_external(self, callback_id: str | UUID, payload: Any = None) -> CallbackResult:
        """Completes the callback's job with ``payload`` as its result (what the HTTP ``complete``
        endpoint does). An in-process handler waiting on it does not resume: its job is completed."""
        return self._resolve(callback_id, "complete", payload=payload)

    def fail_external(self, callback_id: str | UUID, error: str, retryable: bool = False) -> CallbackResult:
        """Fails the callback's attempt: ``failed`` for good, or with ``retryable=True`` retried per the
        job's retry policy (``retryable``, or ``failed`` when its attempts are exhausted)."""
        if not isinstance(error, str):
            raise ValidationError("error must be a string")
        if not isinstance(retryable, bool):
            raise ValidationError("retryable must be a bool")
        return self._resolve(callback_id, "fail", error=error, retryable=retryable)

    def heartbeat_external(self, callback_id: str | UUID, timeout_seconds: int) -> CallbackResult:
        """Sets the callback's deadline to now + ``timeout_seconds`` (1 to 2592000: a reset, not an
        addition); the result's ``timeout_at`` is the new deadline."""
        if not _is_int(timeout_seconds) or not 1 <= timeout_seconds <= MAX_HEARTBEAT_SECONDS:
            raise ValidationError(
                f"timeout_seconds must be an integer from 1 to {MAX_HEARTBEAT_SECONDS} (30 days), got {timeout_seconds!r}"
            )
        return self._resolve(callback_id, "heartbeat", timeout_seconds=timeout_seconds)

    def _resolve(
        self,
        callback_id: str | UUID,
        action: str,
        *,
        payload: Any = None,
        error: str | None = None,
        retryable: bool | None = None,
        timeout_seconds: int | None = None,
    ) -> CallbackResult:
        cb = check_callback_id(callback_id)
        payload_text = None if payload is None else json_text(check_json_value("payload", payload))
        if error is not None:
            check_text("error", error)
        with self._use(None) as cur:
            rows = self._call(
                cur,
                f"select outcome, job_id, state::text as state, timeout_at "
                f"from {self._q}.resolve_callback(%s::uuid, %s, %s::jsonb, %s, %s, %s)",
                (cb, action, payload_text, error, retryable, timeout_seconds),
            )
        r = rows[0]
        if r["outcome"] == "not_found":
            raise CallbackNotFoundError(cb)
        if r["outcome"] == "not_pending":
            raise CallbackNotPendingError(cb, r["state"])
        return CallbackResult(
            job_id=int(r["job_id"]),
            callback_id=cb,
            state=r["state"],
            timeout_at=r["timeout_at"] if action == "heartbeat" else None,
        )

    # -- health --------------------------------------------------------------------------------------

    def health_check(self) -> ClusterHealth:
        """The cluster's health as ``svc health --json`` reports it, from the database alone.

        ``ready`` is false (with a ``reason``) when PostgreSQL is unreachable or the schema is not
        migrated to :data:`EXPECTED_SCHEMA_VERSION`; fleet counts are informational (zero workers is
        still ready). Never raises for an unreachable database.
        """
        base: ClusterHealth = {
            "ready": False,
            "postgres": "unreachable",
            "schema_version": None,
            "expected_schema_version": EXPECTED_SCHEMA_VERSION,
            "storage": "unknown",
            "storage_transition": "unknown",
            "live_runtimes": 0,
            "unhealthy_runtimes": 0,
            "pooler": self._pooler,  # type: ignore[typeddict-item]  # a str, checked by resolve_pooler
        }
        try:
            with self.connection() as conn:
                conn.execute("select 1")
                base["postgres"] = "connected"
                present = conn.execute(
                    "select to_regclass(%s) is not null", (f"{self._q}.schema_migrations",)
                ).fetchone()
                version = None
                if present and present[0]:
                    row = conn.execute(f"select max(version) from {self._q}.schema_migrations").fetchone()
                    version = None if row is None or row[0] is None else int(row[0])
                base["schema_version"] = version
                if version is None:
                    base["reason"] = "svc schema not installed: run `svc migrate`"
                    return base
                if version < EXPECTED_SCHEMA_VERSION:
                    base["reason"] = (
                        f"schema version {version} is older than {EXPECTED_SCHEMA_VERSION}: run `svc migrate`"
                    )
                    return base
                row = conn.execute(
                    f"select {self._q}.health(%s, %s)", (EXPECTED_SCHEMA_VERSION, self._live_ms)
                ).fetchone()
                assert row is not None
                report: ClusterHealth = {**row[0], "pooler": self._pooler}
                return report
        except ConnectTimeoutError as e:
            why = e.reason
        except (PoolTimeout, psycopg.OperationalError) as e:
            if base["postgres"] == "connected":
                raise
            why = _first_line(e)
        base["reason"] = f"database unreachable ({why}); check the database URL and that PostgreSQL is running"
        return base

    # -- SQL -----------------------------------------------------------------------------------------

    def _call(
        self, cur: psycopg.Cursor[dict[str, Any]], sql: str, params: Sequence[Any], job_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Runs one statement of the SQL API, turning its errors into the library's."""
        try:
            cur.execute(sql.encode(), params)
            return cur.fetchall()
        except psycopg.errors.RaiseException as e:  # SQLSTATE P0001: the REST code in HINT
            raise _api_error(e, job_id) from None
        except psycopg.errors.InvalidParameterValue as e:  # 22023: invalid enqueue input
            raise ValidationError(e.diag.message_primary or _first_line(e)) from None


def _api_error(e: psycopg.errors.RaiseException, job_id: int | None) -> Exception:
    hint = e.diag.message_hint
    message = e.diag.message_primary or _first_line(e)
    if hint == "job_not_found":
        return JobNotFoundError(job_id if job_id is not None else 0)
    if hint == "invalid_state":
        return InvalidStateError(message)
    if hint == "unique_conflict":
        m = re.search(r"unique key (\S+) already exists \(job (\d+)\)", message)
        return UniqueConflictError(int(m.group(2)), m.group(1)) if m else SvcError(message, "unique_conflict")
    if hint == "invalid_request":
        return ValidationError(message)
    return e


# -- input ---------------------------------------------------------------------------------------------


def _object(what: str, v: object) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValidationError(f"{what} must be a JSON object (a dict), got {type(v).__name__}")
    return v


def _check_queue(queue: object) -> str:
    if not isinstance(queue, str) or not _QUEUE_RE.match(queue):
        raise ValidationError(f"invalid queue name {queue!r}: use 1 to 48 characters of A-Z a-z 0-9 _ . -")
    return queue


def _run_at(run_at: object) -> str | None:
    if run_at is None:
        return None
    if isinstance(run_at, str):
        run_at = parse_rfc3339("run_at", run_at)
    if not isinstance(run_at, datetime):
        raise ValidationError("run_at must be a datetime (timezone-aware) or an RFC 3339 string")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValidationError("run_at must be timezone-aware, e.g. datetime.now(timezone.utc) + timedelta(hours=1)")
    return run_at.isoformat()


def _unique(u: object) -> dict[str, Any] | None:
    if u is None or u is False:
        return None
    if u is True:
        u = Unique()
    if isinstance(u, Mapping):
        extra = set(u) - {"by_args", "by_queue", "period_ms"}
        if extra:
            raise ValidationError(f"unique takes by_args, by_queue and period_ms, not {', '.join(sorted(extra))}")
        u = Unique(**u)
    if not isinstance(u, Unique):
        raise ValidationError("unique must be a Unique(...), a dict of its fields, True or None")
    if not isinstance(u.by_args, bool) or not isinstance(u.by_queue, bool):
        raise ValidationError("unique.by_args and unique.by_queue must be bools")
    period = u.period_ms
    if period is not None:
        if not isinstance(period, (int, float)) or isinstance(period, bool) or not period >= 1:
            raise ValidationError("unique.period_ms must be a positive number of milliseconds")
        period = int(period)
    return {"by_args": u.by_args, "by_queue": u.by_queue, "period_ms": period}


def _prepare(item: EnqueueItem, index: int) -> tuple[str, Any, dict[str, Any], str]:
    """Validates one job and fills its defaults: (kind, args, opts of the SQL enqueue, on_conflict)."""
    if not isinstance(item, Mapping):
        raise ValidationError(f"item {index} must be a dict with at least a kind")
    known = set(EnqueueItem.__annotations__)
    extra = set(item) - known
    if extra:
        raise ValidationError(f"unknown enqueue option {', '.join(sorted(extra))}")
    kind = item.get("kind")
    if not isinstance(kind, str) or not 1 <= len(kind) <= 255:
        raise ValidationError("kind must be a non-empty string of at most 255 characters")
    check_text("kind", kind)
    raw_args = item.get("args")
    args = check_json_value(f"args of {kind}", _object(f"args of {kind}", {} if raw_args is None else raw_args))
    queue = _check_queue(item.get("queue", "default"))
    priority = item.get("priority", 2)
    if not _is_int(priority) or not 1 <= priority <= 4:
        raise ValidationError(f"priority must be an integer from 1 (highest) to 4, got {priority!r}")
    max_attempts = item.get("max_attempts", 25)
    if not _is_int(max_attempts) or not 1 <= max_attempts <= 1000:
        raise ValidationError(f"max_attempts must be an integer from 1 to 1000, got {max_attempts!r}")
    tags = item.get("tags", ())
    if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(isinstance(t, str) for t in tags):
        raise ValidationError("tags must be a list of strings")
    for i, t in enumerate(tags):
        check_text(f"tags[{i}]", t)
    raw_metadata = item.get("metadata")
    metadata = check_json_value("metadata", _object("metadata", {} if raw_metadata is None else raw_metadata))
    on_conflict = item.get("on_conflict", "return")
    if on_conflict not in _ON_CONFLICT:
        raise ValidationError('on_conflict must be "return" or "error"')
    traceparent = item.get("traceparent")
    if traceparent is not None and (not isinstance(traceparent, str) or not _TRACEPARENT_RE.match(traceparent)):
        raise ValidationError("traceparent must be a W3C traceparent such as 00-<32 hex>-<16 hex>-01")
    limit_key = item.get("limit_key")
    if limit_key is not None:
        if not isinstance(limit_key, str) or not 1 <= len(limit_key) <= 255:
            got = f"{len(limit_key)} characters" if isinstance(limit_key, str) else type(limit_key).__name__
            raise ValidationError(f"limit_key must be a string of 1 to 255 characters, got {got}")
        check_text("limit_key", limit_key)
    opts: dict[str, Any] = {
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "tags": list(tags),
        "metadata": metadata,
    }
    run_at = _run_at(item.get("run_at"))
    if run_at is not None:
        opts["run_at"] = run_at
    unique = _unique(item.get("unique"))
    if unique is not None:
        opts["unique"] = unique
    if traceparent is not None:
        opts["traceparent"] = traceparent
    if limit_key is not None:
        opts["limit_key"] = limit_key
    return kind, args, opts, str(on_conflict)


# -- output --------------------------------------------------------------------------------------------


def _time(v: Any) -> datetime | None:
    """A time of the SQL API in UTC, at the millisecond precision of its JSON (and of every svc surface)."""
    if v is None:
        return None
    t = v if isinstance(v, datetime) else datetime.fromisoformat(v)
    return t.astimezone(timezone.utc).replace(microsecond=t.microsecond // 1000 * 1000)


def _job_error(e: Any) -> Any:
    """An attempt's error as stored: the message, then its stack after U+001E; split into error and stack."""
    if not isinstance(e, dict) or not isinstance(e.get("error"), str):
        return e
    message, sep, stack = e["error"].partition("\x1e")
    if sep:
        return {**e, "error": message, "stack": stack}
    if "stack" not in e and message.startswith("rescued: "):
        return {
            **e,
            "stack": f"the leader rescued this attempt ({message[9:]}): the process running it stopped "
            "heartbeating or overran its deadline, so no error of the handler was recorded; its own log may say more",
        }
    return e


def _job_from_json(j: Mapping[str, Any]) -> Job:
    """A job from the SQL API's JSON (the REST shape)."""
    run_at = _time(j["run_at"])
    created_at = _time(j["created_at"])
    assert run_at is not None and created_at is not None
    return Job(
        id=int(j["id"]),
        kind=j["kind"],
        queue=j["queue"],
        args=j["args"],
        state=j["state"],
        priority=int(j["priority"]),
        attempt=int(j["attempt"]),
        max_attempts=int(j["max_attempts"]),
        effective_max_attempts=j.get("effective_max_attempts"),
        run_at=run_at,
        created_at=created_at,
        claimed_at=_time(j.get("claimed_at")),
        attempted_at=_time(j.get("attempted_at")),
        finalized_at=_time(j.get("finalized_at")),
        heartbeat_at=_time(j.get("heartbeat_at")),
        deadline_at=_time(j.get("deadline_at")),
        errors=[_job_error(e) for e in j.get("errors") or []],
        tags=list(j.get("tags") or []),
        metadata=j.get("metadata") or {},
        result=j.get("result"),
        unique_key=j.get("unique_key"),
        callback_id=None if j.get("callback_id") is None else str(j["callback_id"]),
        callback_timeout_at=_time(j.get("callback_timeout_at")),
        lease=int(j.get("lease") or 0),
        attempted_by=j.get("attempted_by"),
        duplicate=bool(j.get("duplicate", False)),
        trace_context=j.get("trace_context"),
        limit_key=j.get("limit_key"),
    )


def _job_from_row(r: Mapping[str, Any]) -> Job:
    """A job from the columns of the SQL ``enqueue``."""
    return _job_from_json(r)

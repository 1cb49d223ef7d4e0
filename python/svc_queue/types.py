"""Records the client returns and the options it takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, NotRequired, Required, Sequence, TypedDict

__all__ = [
    "JobState",
    "JOB_STATES",
    "TERMINAL_STATES",
    "Job",
    "JobPage",
    "Unique",
    "EnqueueItem",
    "CallbackResult",
    "ClusterHealth",
]

JobState = Literal[
    "scheduled", "available", "running", "waiting_external", "retryable", "completed", "failed", "cancelled"
]

JOB_STATES: tuple[JobState, ...] = (
    "scheduled",
    "available",
    "running",
    "waiting_external",
    "retryable",
    "completed",
    "failed",
    "cancelled",
)
"""Every state a job can be in, in lifecycle order."""

TERMINAL_STATES: tuple[JobState, ...] = ("completed", "failed", "cancelled")
"""States a job never leaves on its own."""


@dataclass
class Job:
    """A job, with the fields of the REST API (snake_case) and times as aware datetimes."""

    id: int
    kind: str
    queue: str
    args: dict[str, Any]
    state: JobState
    priority: int
    attempt: int
    max_attempts: int
    """The job's own limit of attempts."""
    effective_max_attempts: int | None
    """The limit that applied to the latest attempt (the smaller of the job's and its kind's)."""
    run_at: datetime
    created_at: datetime
    claimed_at: datetime | None
    """When the latest attempt was claimed (held, prefetched jobs too); None before the first claim."""
    attempted_at: datetime | None
    """When the latest attempt's handler started, written with its outcome; None while an attempt runs."""
    finalized_at: datetime | None
    heartbeat_at: datetime | None
    deadline_at: datetime | None
    errors: list[dict[str, Any]]
    """One entry per failed attempt: ``{attempt, at, error, terminal?, stack?}`` (``stack``: the handler's
    stack, an HTTP function's status and answer, or a rescue's reason; at most 8 KB)."""
    tags: list[str]
    metadata: dict[str, Any]
    result: Any
    unique_key: str | None
    callback_id: str | None
    callback_timeout_at: datetime | None
    lease: int
    """Run lease: incremented by every claim."""
    attempted_by: str | None
    duplicate: bool = False
    """Set on the job that ``enqueue`` returns when a unique job with the same key already existed."""
    trace_context: str | None = None
    limit_key: str | None = None
    """The key per-key limits count the job by (set at enqueue, kept through every attempt); None: none."""


@dataclass
class JobPage:
    """A page of ``list_jobs``: pass ``next_cursor`` as ``cursor`` for the next one (``None``: last page)."""

    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class Unique:
    """Unique-job options: the key is built over the kind, plus the parts switched on here.

    The key is computed by the database's ``unique_key()``, the one definition every client shares.
    """

    by_args: bool = True
    """Include the args in the key."""
    by_queue: bool = False
    """Include the queue in the key."""
    period_ms: int | None = None
    """Include the time bucket ``floor(run_at / period_ms)`` in the key."""


class EnqueueItem(TypedDict, total=False):
    """One job of ``enqueue_many``: the arguments of ``enqueue`` as a dict."""

    kind: Required[str]
    args: Mapping[str, Any]
    queue: str
    priority: int
    run_at: datetime | str | None
    max_attempts: int
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    unique: Unique | Mapping[str, Any] | bool | None
    on_conflict: Literal["return", "error"]
    traceparent: str | None
    limit_key: str | None


@dataclass
class CallbackResult:
    """What a callback resolution returns: the job and its state after the call."""

    job_id: int
    callback_id: str
    state: JobState
    timeout_at: datetime | None = field(default=None)
    """The callback's new deadline (heartbeat only)."""


class ClusterHealth(TypedDict):
    """The ``svc health --json`` object (same keys and meanings)."""

    ready: bool
    postgres: Literal["connected", "unreachable"]
    schema_version: int | None
    expected_schema_version: int
    storage: str
    storage_transition: str
    live_runtimes: int
    unhealthy_runtimes: int
    pooler: Literal["transaction", "none"]
    """``transaction`` when the client's connections go through a transaction pooler."""
    reason: NotRequired[str]
    """Why ``ready`` is false; absent when ready."""

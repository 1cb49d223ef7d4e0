"""Errors users meet, named like the TypeScript library's, each with the stable ``code`` of the REST API."""

from __future__ import annotations

__all__ = [
    "SvcError",
    "ValidationError",
    "UniqueConflictError",
    "InvalidStateError",
    "JobNotFoundError",
    "QueueNotFoundError",
    "CallbackNotFoundError",
    "CallbackNotPendingError",
    "CallbackRequestError",
    "ConnectTimeoutError",
    "TerminalError",
]


class SvcError(Exception):
    """Base class: every svc error has a machine-readable ``code``."""

    code: str = "internal"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class ValidationError(SvcError, ValueError):
    """Bad input: an enqueue option out of range, args not an object, a malformed id. Nothing was written."""

    code = "invalid_request"


class UniqueConflictError(SvcError):
    """A unique job with the same key is still in a non-terminal state (``on_conflict="error"``)."""

    code = "unique_conflict"

    def __init__(self, existing_job_id: int, unique_key: str) -> None:
        super().__init__(
            f"a job with unique key {unique_key} already exists (job {existing_job_id}) and is not finished"
        )
        self.existing_job_id = existing_job_id
        self.unique_key = unique_key


class InvalidStateError(SvcError):
    """The job's state does not allow the change (retry of a running job, cancel of a finished one)."""

    code = "invalid_state"


class JobNotFoundError(SvcError):
    """No job with that id."""

    code = "not_found"

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class QueueNotFoundError(SvcError):
    """No queue of that name: no queues row, no job, and no live runtime serving it.

    Raised by queue operations (pause and resume), which the TypeScript client and the ``svc queue``
    command offer; the Python client has none yet, and the class is here so that the names match.
    """

    code = "not_found"

    def __init__(self, queue: str) -> None:
        super().__init__(
            f"queue {queue!r} not found: it has no jobs, was never paused, and no live worker serves it"
        )
        self.queue = queue


class CallbackNotFoundError(SvcError):
    """No callback with that id."""

    code = "callback_not_found"

    def __init__(self, callback_id: str) -> None:
        super().__init__(f"callback {callback_id} not found")
        self.callback_id = callback_id


class CallbackNotPendingError(SvcError):
    """The callback exists but was already resolved, superseded, expired, or its job was cancelled."""

    code = "callback_not_pending"

    def __init__(self, callback_id: str, job_state: str | None) -> None:
        super().__init__(
            f"callback {callback_id} is no longer pending (already resolved, superseded by a later attempt, "
            f"past its deadline, or its job is {job_state or 'gone'})"
        )
        self.callback_id = callback_id
        self.job_state = job_state


class CallbackRequestError(SvcError):
    """A callback request over HTTP (``post_callback``) was refused or could not be sent.

    ``status`` is the HTTP status (``None`` when no response came); ``code`` is the receiver's error
    code (``callback_not_found``, ``callback_not_pending``, ``invalid_signature``, ...) or
    ``unreachable``.
    """

    def __init__(self, message: str, *, status: int | None, code: str, body: object = None) -> None:
        super().__init__(message, code)
        self.status = status
        self.body = body


class ConnectTimeoutError(SvcError):
    """No connection to PostgreSQL could be had within the connect timeout; ``reason`` says why."""

    code = "connect_timeout"

    def __init__(self, target: str, timeout: float, reason: str) -> None:
        super().__init__(
            f"no PostgreSQL answered at {target} within {timeout:g} s ({reason}); "
            "check the database URL and that PostgreSQL is running"
        )
        self.target = target
        self.timeout = timeout
        self.reason = reason


class TerminalError(Exception):
    """Raise from a function handler to fail the job for good, whatever attempts remain."""

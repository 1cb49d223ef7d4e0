"""svc_queue: the Python client of svc, a job queue whose whole state lives in PostgreSQL.

Producers enqueue jobs (also inside their own transaction), read, cancel and retry them, resolve
callbacks of HTTP functions and in-process waiters, and check the cluster's health. Job handlers in
Python run as HTTP functions that an svc HTTP worker pushes jobs to: see :class:`FunctionEndpoint`.
"""

from .client import DEFAULT_SCHEMA, EXPECTED_SCHEMA_VERSION, MAX_HEARTBEAT_SECONDS, Client
from .contract import (
    CALLBACK_ACTIONS,
    DEFAULT_CALLBACK_PATH_PREFIX,
    SIGNATURE_HEADER,
    CallbackAction,
    callback_url,
    is_uuid,
    normalize_path_prefix,
    parse_secret,
    sign,
    verify,
)
from .errors import (
    CallbackNotFoundError,
    CallbackNotPendingError,
    CallbackRequestError,
    ConnectTimeoutError,
    InvalidStateError,
    JobNotFoundError,
    QueueNotFoundError,
    SvcError,
    TerminalError,
    UniqueConflictError,
    ValidationError,
)
from .function_endpoint import FunctionCall, FunctionEndpoint, post_callback
from .types import (
    JOB_STATES,
    TERMINAL_STATES,
    CallbackResult,
    ClusterHealth,
    EnqueueItem,
    Job,
    JobPage,
    JobState,
    Unique,
)

__version__ = "0.1.0"

__all__ = [
    "CALLBACK_ACTIONS",
    "DEFAULT_CALLBACK_PATH_PREFIX",
    "DEFAULT_SCHEMA",
    "EXPECTED_SCHEMA_VERSION",
    "JOB_STATES",
    "MAX_HEARTBEAT_SECONDS",
    "SIGNATURE_HEADER",
    "TERMINAL_STATES",
    "CallbackAction",
    "CallbackNotFoundError",
    "CallbackNotPendingError",
    "CallbackRequestError",
    "CallbackResult",
    "Client",
    "ClusterHealth",
    "ConnectTimeoutError",
    "EnqueueItem",
    "FunctionCall",
    "FunctionEndpoint",
    "InvalidStateError",
    "Job",
    "JobNotFoundError",
    "JobPage",
    "JobState",
    "QueueNotFoundError",
    "SvcError",
    "TerminalError",
    "Unique",
    "UniqueConflictError",
    "ValidationError",
    "callback_url",
    "is_uuid",
    "normalize_path_prefix",
    "parse_secret",
    "post_callback",
    "sign",
    "verify",
]

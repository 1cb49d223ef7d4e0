"""What PostgreSQL can store and what survives the trip to a JavaScript handler: the input rules of the
TypeScript library, for values built in Python.

Refused with a ``ValidationError``: strings (dict keys included) holding U+0000 or a surrogate code
point (jsonb and text columns reject both), JSON nested deeper than 512 levels, dict keys that are not
strings, values JSON has no form for (NaN, infinities, sets, bytes, objects), integers a 64-bit
double would change (handlers in JavaScript would read another number), and impossible dates.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import ValidationError

__all__ = [
    "MAX_JSON_DEPTH",
    "check_text",
    "check_json_value",
    "json_text",
    "parse_rfc3339",
    "check_callback_id",
    "check_job_id",
    "check_job_cursor",
]

MAX_JSON_DEPTH = 512
"""Deepest nesting of lists and dicts accepted in a JSON value."""

_MAX_BIGINT = 2**63 - 1
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SURROGATE_OR_NUL = re.compile("[\0\ud800-\udfff]")


def _text_problem(s: str) -> str | None:
    m = _SURROGATE_OR_NUL.search(s)
    if m is None:
        return None
    if m.group() == "\0":
        return "contains U+0000 (NUL), which PostgreSQL cannot store"
    return f"contains a lone surrogate (\\u{ord(m.group()):04x}), which is not Unicode text"


def check_text(what: str, s: str) -> str:
    """Returns ``s``, or raises a ValidationError naming ``what`` when PostgreSQL cannot store it."""
    problem = _text_problem(s)
    if problem:
        raise ValidationError(f"{what} {problem}")
    return s


def _number(what: str, v: int | float) -> int | float:
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValidationError(f"{what}: {v} is not a JSON number")
        # As JavaScript writes it: 2.0 is 2, so that keys and stored args match a TypeScript producer's.
        if v.is_integer() and abs(v) < 1e16:
            return int(v)
        return v
    try:
        read = float(v)
    except OverflowError:
        raise ValidationError(
            f"{what}: the integer {_short(v)} is out of the range of a 64-bit double; send it as a string"
        ) from None
    if read != v:
        raise ValidationError(
            f"{what}: the integer {_short(v)} would be read as {read:.17g} by a 64-bit double; "
            "send numbers that a double holds exactly (or send it as a string)"
        )
    return v


def _short(n: int) -> str:
    s = str(n) if n.bit_length() < 4000 else f"of {n.bit_length()} bits"
    return s if len(s) <= 40 else s[:40] + "…"


def _normalize(what: str, value: Any) -> Any:
    """A copy of ``value`` with floats as JavaScript writes them; raises on anything JSON cannot carry."""
    # Iterative, so that a value nested deeper than Python's recursion limit is refused, not a crash.
    root: list[Any] = [None]
    stack: list[tuple[Any, list[Any] | dict[str, Any], Any, int]] = [(value, root, 0, 0)]
    while stack:
        v, parent, slot, depth = stack.pop()
        if v is None or isinstance(v, bool):
            out: Any = v
        elif isinstance(v, str):
            problem = _text_problem(v)
            if problem:
                raise ValidationError(f"{what}: a string {problem}")
            out = v
        elif isinstance(v, (int, float)):
            out = _number(what, v)
        elif isinstance(v, dict):
            if depth + 1 > MAX_JSON_DEPTH:
                raise ValidationError(f"{what}: JSON is nested deeper than {MAX_JSON_DEPTH} levels")
            out = {}
            for k, item in v.items():
                if not isinstance(k, str):
                    raise ValidationError(f"{what}: object keys must be strings, got {type(k).__name__} {k!r}")
                problem = _text_problem(k)
                if problem:
                    raise ValidationError(f"{what}: a key {problem}")
                out[k] = None
                stack.append((item, out, k, depth + 1))
        elif isinstance(v, (list, tuple)):
            if depth + 1 > MAX_JSON_DEPTH:
                raise ValidationError(f"{what}: JSON is nested deeper than {MAX_JSON_DEPTH} levels")
            out = [None] * len(v)
            for i, item in enumerate(v):
                stack.append((item, out, i, depth + 1))
        else:
            raise ValidationError(f"{what} must be JSON-serializable: {type(v).__name__} is not")
        parent[slot] = out
    return root[0]


def check_json_value(what: str, value: Any) -> Any:
    """Checks that ``value`` can be stored as jsonb as sent; returns the normalized copy to send."""
    return _normalize(what, value)


def json_text(value: Any) -> str:
    """JSON text of a value already passed through :func:`check_json_value`."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_rfc3339(what: str, s: str) -> datetime:
    """An RFC 3339 date-time with a zone, e.g. ``2026-12-01T09:00:00Z``; the date must exist."""
    m = _RFC3339.match(s)
    if not m:
        raise ValidationError(f"{what} must be an RFC 3339 time with a zone such as 2026-12-01T09:00:00Z, got {s!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if hour > 23 or minute > 59 or second > 59:
        raise ValidationError(f"{what}: {s!r} is not a time of day")
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValidationError(f"{what}: {s!r} has an impossible offset")
        sign = -1 if m.group(9) == "-" else 1
        tz = timezone(sign * timedelta(hours=oh, minutes=om))
    else:
        tz = timezone.utc
    micro = int((m.group(7) or ".0")[1:7].ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as e:
        raise ValidationError(f"{what}: {s!r} is not a date that exists ({e})") from None


def check_callback_id(callback_id: object) -> str:
    """A callback id as a lowercase UUID string; a ValidationError for anything else."""
    if isinstance(callback_id, uuid.UUID):
        return str(callback_id)
    if not isinstance(callback_id, str) or not _UUID_RE.match(callback_id):
        raise ValidationError(f"callback id must be a UUID, got {json.dumps(callback_id, default=repr)}")
    return callback_id.lower()


def check_job_id(job_id: object) -> int:
    """A job id: a positive integer."""
    if isinstance(job_id, bool) or not isinstance(job_id, int) or not 1 <= job_id <= _MAX_BIGINT:
        raise ValidationError(f"job id must be a positive integer, got {job_id!r}")
    return job_id


def check_job_cursor(cursor: object) -> str:
    """A ``next_cursor`` a page of ``list_jobs`` could have given (base64 of ``id:<n>``)."""
    bad = ValidationError("invalid cursor: pass the next_cursor of a previous page, or omit it for the first page")
    if not isinstance(cursor, str) or not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", cursor):
        raise bad
    try:
        text = base64.b64decode(cursor + "=" * (-len(cursor) % 4), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    m = re.fullmatch(r"id:(\d{1,16})", text)
    if not m or not 1 <= int(m.group(1)) <= 2**53 - 1:
        raise bad
    return cursor

"""The callback contract shared with the HTTP worker and the callback receiver: callback URLs and
signatures.

A signature is the lowercase hex BLAKE3 keyed hash of the callback id (UTF-8), keyed with the 32-byte
secret. It is not computed over the request body and is not RFC HMAC, despite the setting's name
(``SERVICE_CALLBACK_HMAC_SECRET``).
"""

from __future__ import annotations

import hmac
import re
from typing import Literal
from urllib.parse import quote

from ._blake3 import blake3_keyed
from .errors import ValidationError

__all__ = [
    "SIGNATURE_HEADER",
    "DEFAULT_CALLBACK_PATH_PREFIX",
    "CALLBACK_ACTIONS",
    "CallbackAction",
    "callback_url",
    "normalize_path_prefix",
    "is_uuid",
    "parse_secret",
    "sign",
    "verify",
]

SIGNATURE_HEADER = "X-Service-Signature"
"""Request header that carries the callback signature."""

DEFAULT_CALLBACK_PATH_PREFIX = "/api/callbacks"
"""Default path prefix of the callback receiver's routes."""

CallbackAction = Literal["complete", "fail", "heartbeat"]
CALLBACK_ACTIONS: tuple[CallbackAction, ...] = ("complete", "fail", "heartbeat")
"""The three callback endpoints of the receiver."""

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX64_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_SURROGATES = re.compile("[\ud800-\udfff]")


def is_uuid(s: str) -> bool:
    """True when ``s`` is a UUID in canonical 8-4-4-4-12 hex form (any case, any version)."""
    return isinstance(s, str) and _UUID_RE.match(s) is not None


def normalize_path_prefix(prefix: str) -> str:
    """Trims whitespace and trailing slashes; empty stays empty, else a missing leading slash is added."""
    trimmed = prefix.strip().rstrip("/")
    if trimmed == "":
        return ""
    return trimmed if trimmed.startswith("/") else f"/{trimmed}"


def callback_url(
    base_url: str,
    path_prefix: str | None,
    callback_id: str,
    action: CallbackAction = "complete",
) -> str:
    """The URL of one callback endpoint: ``{base_url}{prefix}/{callback_id}/{action}``.

    Trailing slashes of ``base_url`` are stripped; ``path_prefix`` ``None`` means
    :data:`DEFAULT_CALLBACK_PATH_PREFIX`. The callback id is percent-encoded as one path segment (a UUID
    is left unchanged).
    """
    if action not in CALLBACK_ACTIONS:
        raise ValidationError(f'unknown callback action "{action}": expected one of {", ".join(CALLBACK_ACTIONS)}')
    prefix = normalize_path_prefix(DEFAULT_CALLBACK_PATH_PREFIX if path_prefix is None else path_prefix)
    segment = quote(_SURROGATES.sub("\ufffd", callback_id), safe="!~*'()")
    return f"{base_url.rstrip('/')}{prefix}/{segment}/{action}"


def parse_secret(hex_secret: str) -> bytes:
    """Parses the shared secret from exactly 64 hex characters (either case) into its 32 bytes.

    The error says how to make a valid secret; it never contains the input.
    """
    if not isinstance(hex_secret, str) or not _HEX64_RE.match(hex_secret):
        if not isinstance(hex_secret, str):
            problem = "is not a string"
        elif len(hex_secret) != 64:
            problem = f"has {len(hex_secret)} characters"
        else:
            problem = "contains a character that is not hex"
        raise ValidationError(
            f"callback HMAC secret must be exactly 64 hex characters (32 bytes) but {problem}; "
            "generate one with: openssl rand -hex 32"
        )
    return bytes.fromhex(hex_secret)


def _digest(secret: bytes, callback_id: str) -> bytes:
    if not isinstance(secret, (bytes, bytearray, memoryview)) or len(secret) != 32:
        raise ValidationError(
            "callback HMAC secret must be 32 bytes; parse the 64-hex-character setting with parse_secret()"
        )
    # A lone surrogate is written as U+FFFD, as the TypeScript library's UTF-8 encoder does.
    return blake3_keyed(bytes(secret), _SURROGATES.sub("\ufffd", callback_id).encode("utf-8"))


def sign(secret: bytes, callback_id: str) -> str:
    """Signature of ``callback_id`` under ``secret``: 64 lowercase hex characters."""
    return _digest(secret, callback_id).hex()


def verify(secret: bytes, callback_id: str, signature: str | None) -> bool:
    """True when ``signature`` is the signature of ``callback_id`` under ``secret``.

    Anything but exactly 64 hex characters (missing, empty, too short or long, non-hex) is invalid; hex
    is compared case-insensitively and in constant time. A ``secret`` that is not 32 bytes is a
    configuration error (ValidationError), not a bad request.
    """
    expected = _digest(secret, callback_id)
    if not isinstance(signature, str) or not _HEX64_RE.match(signature):
        return False
    return hmac.compare_digest(expected, bytes.fromhex(signature))

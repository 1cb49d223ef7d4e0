"""The contract helpers against the repository's vectors (tests/fixtures/vectors/), and the pure-Python
BLAKE3 against the TypeScript library's on long messages."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

import pytest
from conftest import REPO, deno

from svc_queue import (
    DEFAULT_CALLBACK_PATH_PREFIX,
    EXPECTED_SCHEMA_VERSION,
    SIGNATURE_HEADER,
    ValidationError,
    callback_url,
    is_uuid,
    normalize_path_prefix,
    parse_secret,
    sign,
    verify,
)
from svc_queue._blake3 import blake3_keyed

VECTORS = REPO / "tests" / "fixtures" / "vectors"


def vectors(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]
    assert cases, f"{name} has no cases"
    return cases


SIGNATURES = vectors("callback_signatures.json")
URLS = vectors("callback_urls.json")


@pytest.mark.parametrize("case", SIGNATURES, ids=[f"sig{i}" for i in range(len(SIGNATURES))])
def test_signature_vector(case: dict[str, Any]) -> None:
    secret = parse_secret(case["secret_hex"])
    assert len(secret) == 32
    assert sign(secret, case["callback_id"]) == case["signature"]
    assert verify(secret, case["callback_id"], case["signature"])
    assert verify(secret, case["callback_id"], case["signature"].upper())
    assert parse_secret(case["secret_hex"].upper()) == secret
    flipped = case["signature"][:-1] + ("0" if case["signature"][-1] != "0" else "1")
    assert not verify(secret, case["callback_id"], flipped)
    assert not verify(secret, case["callback_id"] + "x", case["signature"])


def test_every_signature_vector_is_checked() -> None:
    assert len(SIGNATURES) == 14  # a vector added to the file is picked up by the parametrization above


def test_verify_refuses_anything_but_64_hex() -> None:
    secret = parse_secret(SIGNATURES[0]["secret_hex"])
    cb = SIGNATURES[0]["callback_id"]
    good = SIGNATURES[0]["signature"]
    for bad in [None, "", good[:63], good + "0", good[:62] + "zz", " " + good[1:], good[:63] + "\u0660"]:
        assert verify(secret, cb, bad) is False, bad
    with pytest.raises(ValidationError, match="32 bytes"):
        sign(b"\x00" * 31, cb)
    with pytest.raises(ValidationError, match="32 bytes"):
        verify(b"\x00" * 33, cb, good)


@pytest.mark.parametrize(
    "value,problem",
    [("ab" * 31, "has 62 characters"), ("ab" * 33, "has 66 characters"), ("g" * 64, "not hex"), (None, "not a string")],
)
def test_parse_secret_errors(value: Any, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem) as e:
        parse_secret(value)
    assert "openssl rand -hex 32" in str(e.value)
    if isinstance(value, str):
        assert value not in str(e.value)  # the message never contains the secret


@pytest.mark.parametrize("case", URLS, ids=[f"url{i}" for i in range(len(URLS))])
def test_callback_url_vector(case: dict[str, Any]) -> None:
    assert callback_url(case["base_url"], case["path_prefix"], case["callback_id"], case["action"]) == case["url"]


def test_callback_url_defaults_and_errors() -> None:
    cb = "550e8400-e29b-41d4-a716-446655440000"
    assert callback_url("http://x/", None, cb) == f"http://x{DEFAULT_CALLBACK_PATH_PREFIX}/{cb}/complete"
    assert callback_url("http://x", "", "a/b c", "fail") == "http://x/a%2Fb%20c/fail"
    with pytest.raises(ValidationError, match="unknown callback action"):
        callback_url("http://x", None, cb, "resume")  # type: ignore[arg-type]
    assert normalize_path_prefix(" hooks/ ") == "/hooks"
    assert normalize_path_prefix("///") == ""
    assert is_uuid(cb.upper()) and not is_uuid(cb[:-1]) and not is_uuid(f"{{{cb}}}")
    assert SIGNATURE_HEADER == "X-Service-Signature"


def test_blake3_matches_the_typescript_library_on_long_messages() -> None:
    """Multi-block and multi-chunk messages (the vectors are all one block), hashed by @noble/hashes."""
    lengths = [0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 2049, 3072, 4097, 8192, 9217, 17409]
    cases = [{"key": os.urandom(32).hex(), "msg": bytes(i % 251 for i in range(n)).hex()} for n in lengths]
    r = subprocess.run(
        [*deno(), "run", "--quiet", str(REPO / "python" / "tests" / "fixtures" / "blake3.ts")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)
    for n, case, hexdigest in zip(lengths, cases, expected):
        assert blake3_keyed(bytes.fromhex(case["key"]), bytes.fromhex(case["msg"])).hex() == hexdigest, n


def test_expected_schema_version_matches_the_migrations() -> None:
    source = (REPO / "src" / "db" / "schema_version.ts").read_text(encoding="utf-8")
    versions = [int(v) for v in re.findall(r"\{ version: (\d+), file:", source)]
    assert versions and EXPECTED_SCHEMA_VERSION == versions[-1]

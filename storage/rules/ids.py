"""Identifiers (ULIDs in Crockford base32) and API key secrets."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_LENGTH = 26
SECRET_RANDOM_CHARS = 43
_SECRET_BODY = re.compile(r"[A-Za-z0-9_-]{43,256}")
_ULID_BODY = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class UlidGenerator:
    """Monotonic ULIDs: 48 bits of milliseconds, 80 random bits, strictly increasing here.

    Within one millisecond the random part is incremented, so ids made by one process sort
    in creation order even when they share a timestamp.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def new(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                self._last_random += 1
                if self._last_random >= 1 << 80:
                    ms += 1
                    self._last_random = int.from_bytes(os.urandom(10), "big") >> 1
            else:
                self._last_random = int.from_bytes(os.urandom(10), "big") >> 1
            self._last_ms = ms
            return _encode((ms << 80) | self._last_random, ULID_LENGTH)


_generator = UlidGenerator()


def new_id(prefix: str) -> str:
    return prefix + _generator.new()


def is_id(value: str, prefix: str) -> bool:
    return value.startswith(prefix) and bool(_ULID_BODY.fullmatch(value[len(prefix) :]))


SNAPSHOT_PREFIX = "snap_"
"""What a snapshot's id starts with."""

NULL_VERSION = "null"
"""How S3 names the version a key gets while versioning is off or suspended."""


def is_version_id(value: str) -> bool:
    """A version id bucketd could have given out: a ULID, or `null`."""
    return value == NULL_VERSION or is_id(value, "")


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)[:SECRET_RANDOM_CHARS]


def is_secret_shaped(value: str, prefix: str) -> bool:
    return value.startswith(prefix) and bool(_SECRET_BODY.fullmatch(value[len(prefix) :]))


def new_access_key_id() -> str:
    """20 characters like AWS's: a `BKD` prefix and 17 uppercase letters and digits."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    return "BKD" + "".join(secrets.choice(alphabet) for _ in range(17))


def new_s3_secret() -> str:
    return secrets.token_urlsafe(30)


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()

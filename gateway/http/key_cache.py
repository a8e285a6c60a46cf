"""Recently verified keys, by the token a request presents (a bearer secret's hash, an S3
access key id): one rule for the API's and the S3 endpoint's authenticators.

An entry serves for `seconds`, so a key made or changed by another process is seen soon;
a revocation drops the key at once here (`forget`, called on every commit notice) and, in
a server of several workers, in every worker before the revocation is answered: an entry
serves only while the workers' shared revocation count has not moved since it was made
(`generation.py`).
"""

from __future__ import annotations

import time
from typing import Generic, TypeVar

from gateway.http.generation import Generation

T = TypeVar("T")
MAX_ENTRIES = 10_000


class KeyCache(Generic[T]):
    def __init__(self, seconds: float, revocations: Generation | None = None) -> None:
        self._seconds = seconds
        self._revocations = revocations
        self._entries: dict[object, tuple[str, T, float, int]] = {}

    def generation(self) -> int:
        """The revocation count now: read it before looking a key up, and `put` with it."""
        return self._revocations.value() if self._revocations is not None else 0

    def get(self, token: object) -> T | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        if time.monotonic() - entry[2] >= self._seconds or entry[3] != self.generation():
            return None
        return entry[1]

    def put(self, token: object, key_id: str, value: T, generation: int) -> None:
        """Remember `value`; `generation`: the count read before the key was looked up (a
        revocation committed during the lookup then makes the entry stale at once)."""
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[token] = (key_id, value, time.monotonic(), generation)

    def drop(self, token: object) -> None:
        self._entries.pop(token, None)

    def forget(self, key_id: str) -> None:
        for token, entry in list(self._entries.items()):
            if entry[0] == key_id:
                del self._entries[token]
        if self._revocations is not None:
            self._revocations.bump()

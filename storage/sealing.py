"""Secrets bucketd must be able to read back (S3 secret keys, needed for HMAC), sealed at
rest with AES-256-GCM under a key kept in the data dir, never stored in plain text."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from .datadir import key_file
from .errors import SecretUnsealable

KEY_FILE = "secrets.key"
KEY_BYTES = 32
NONCE_BYTES = 12


class Sealer:
    def __init__(self, key: bytes) -> None:
        # cryptography takes a tenth of a server's start to import: only where a secret is.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._key = key

    def derive(self, purpose: str, material: bytes) -> bytes:
        """A key for `purpose`, bound to `material`, that only a holder of this data dir's
        sealing key can compute (HMAC-SHA256 of both under it): what the index alone, or a
        copy of it, never gives."""
        inner = hmac.new(self._key, purpose.encode("utf-8"), hashlib.sha256).digest()
        return hmac.new(inner, material, hashlib.sha256).digest()

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> Sealer:
        """The data dir's sealing key (`secrets.key`), made the first time it is needed
        (`datadir.key_file`)."""
        return cls(key_file(data_dir, KEY_FILE, KEY_BYTES))

    def seal(self, secret: str, context: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, secret.encode("utf-8"), context.encode("utf-8"))

    def open(self, sealed: bytes, context: str) -> str:
        from cryptography.exceptions import InvalidTag

        nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, body, context.encode("utf-8")).decode("utf-8")
        except InvalidTag:
            raise SecretUnsealable(
                f"a sealed {context} does not open under this data dir's {KEY_FILE}"
            ) from None

"""Secrets bucketd must be able to read back (S3 secret keys, needed for HMAC), sealed at
rest with AES-256-GCM under a key kept in the data dir, never stored in plain text."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_FILE = "secrets.key"
NONCE_BYTES = 12


class Sealer:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> Sealer:
        """The data dir's sealing key, made (mode 0600) the first time it is needed."""
        path = data_dir / KEY_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return cls(path.read_bytes())
        key = AESGCM.generate_key(bit_length=256)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        return cls(key)

    def seal(self, secret: str, context: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, secret.encode("utf-8"), context.encode("utf-8"))

    def open(self, sealed: bytes, context: str) -> str:
        nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
        return self._aead.decrypt(nonce, body, context.encode("utf-8")).decode("utf-8")

"""SSE-KMS (issue 37 point 3) without a key management service: a keyring of named keys
the operator configures (`storage.kms_keys`, as MinIO's static KMS key). An aws:kms
content's own key is wrapped (AES-256-GCM) by the named key, with the name bound into the
wrap, and the envelope records the name; reading needs that key in the keyring.

A write asks for it with `requested(name)` in `WriteOptions.encryption` (and a bucket's
default encryption, and a multipart upload's): "aws:kms" alone means the default key,
resolved when the content is sealed so that the envelope names the key actually used."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .encryption import KEY_BYTES, NONCE_BYTES, SSE_KMS, Envelope, _read_key, cipher
from .errors import (
    ContentTampered,
    EncryptionKeyMissing,
    InvalidInput,
    KmsKeyNotFound,
    NotSupported,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_ARN = re.compile(r"arn:aws:kms:[^:]*:[^:]*:key/(.+)")
_WRAP_AAD = b"bucketd content key under a kms key v1\x00"


def is_kms(requested: str | None) -> bool:
    """Whether a write's (or bucket's) encryption asks for SSE-KMS."""
    return requested is not None and (requested == SSE_KMS or requested.startswith(SSE_KMS + "/"))


def requested(key_id: str | None) -> str:
    """The encryption a write asks for under the key `key_id` (a name, or an ARN
    `arn:aws:kms:…:key/<name>`; None: the default key). Whether the keyring holds it is
    `Keyring.resolve`'s to say (no keyring at all: 501 before an unknown name's 400)."""
    if not key_id:
        return SSE_KMS
    arn = _ARN.fullmatch(key_id)
    return f"{SSE_KMS}/{arn.group(1) if arn else key_id}"


def key_name(requested: str) -> str | None:
    """The key name a requested encryption gives; None for the default key."""
    return requested.partition("/")[2] or None


class Keyring:
    """The named keys of `storage.kms_keys`; empty when none is configured."""

    def __init__(self, entries: Iterable[str] = (), default: str = "") -> None:
        self._keys: dict[str, AESGCM] = {}
        for entry in entries:
            name, sep, value = entry.partition("=")
            name = name.strip()
            if not sep or not _NAME.fullmatch(name):
                raise ValueError("a kms_keys entry is name=KEY, with a name of [A-Za-z0-9._-]")
            key = _read_key(value.strip())
            if len(key) != KEY_BYTES:
                raise ValueError(f"the kms key {name} is {len(key)} bytes, not {KEY_BYTES}")
            self._keys[name] = cipher(key)
        if default and default not in self._keys:
            raise ValueError(f"kms_default_key {default!r} is not among kms_keys")
        self.default = default or next(iter(self._keys), "")

    def resolve(self, requested: str) -> str:
        """The name of the key a write asking `requested` is sealed under: NotSupported
        with no keyring, KmsKeyNotFound for a name it does not hold."""
        if not self._keys:
            raise NotSupported(
                "aws:kms: no KMS keyring is configured on this server (storage.kms_keys)"
            )
        name = key_name(requested) or self.default
        if name not in self._keys:  # a malformed name included: no key is named so
            raise KmsKeyNotFound(f"the KMS key {name!r} is not in this server's keyring")
        return name

    def new_content_key(self, requested: str) -> tuple[bytes, Envelope]:
        name = self.resolve(requested)
        content_key = os.urandom(KEY_BYTES)
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[name].encrypt(nonce, content_key, _WRAP_AAD + name.encode())
        return content_key, Envelope(SSE_KMS, name, nonce + sealed)

    def unwrap(self, envelope: Envelope) -> bytes:
        from cryptography.exceptions import InvalidTag

        aead = self._keys.get(envelope.key_id)
        if aead is None:
            raise EncryptionKeyMissing(
                f"the KMS key {envelope.key_id!r} that wraps this content's key is not in "
                "this server's keyring (storage.kms_keys)"
            )
        nonce, sealed = envelope.wrapped[:NONCE_BYTES], envelope.wrapped[NONCE_BYTES:]
        try:
            return aead.decrypt(nonce, sealed, _WRAP_AAD + envelope.key_id.encode())
        except InvalidTag:
            raise ContentTampered("a content's wrapped key does not open") from None


def keyring(entries: Iterable[str], default: str) -> Keyring:
    """The configured keyring; InvalidInput (the server does not start) for a bad entry."""
    try:
        return Keyring(entries, default)
    except (ValueError, OSError) as exc:
        raise InvalidInput(f"storage.kms_keys / kms_default_key: {exc}") from None

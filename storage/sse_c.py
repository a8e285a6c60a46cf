"""SSE-C at rest (issue 37): what the index keeps of an object sealed under a customer's key.
The customer's key is never stored: the content's own key is kept sealed under it (which is
also what verifies a key given later), and so is the plaintext's checksum."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import TYPE_CHECKING

from .encryption import CUSTOMER, NONCE_BYTES, SSE_C, Envelope, cipher
from .errors import ContentTampered, CustomerKeyMismatch

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_CUSTOMER_WRAP_AAD = b"bucketd content key under a customer key v1"


def wrap_for_customer(content_key: bytes, customer_key: bytes) -> Envelope:
    """SSE-C, as MinIO seals an object key with the client's: the content's own random key,
    sealed (AES-256-GCM) under the customer's key. The customer's key is never stored:
    the sealed content key is what verifies it, since it opens under that key alone."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = cipher(customer_key).encrypt(nonce, content_key, _CUSTOMER_WRAP_AAD)
    return Envelope(SSE_C, CUSTOMER, nonce + sealed)


def is_customer(text: str) -> bool:
    """Whether an encoded envelope (a version's `encryption`) is SSE-C's."""
    return Envelope.decode(text).algorithm == SSE_C


def unwrap_for_customer(envelope: Envelope, customer_key: bytes) -> bytes:
    """The content key of an SSE-C envelope; CustomerKeyMismatch under another key."""
    from cryptography.exceptions import InvalidTag

    nonce, sealed = envelope.wrapped[:NONCE_BYTES], envelope.wrapped[NONCE_BYTES:]
    try:
        return cipher(customer_key).decrypt(nonce, sealed, _CUSTOMER_WRAP_AAD)
    except InvalidTag:
        raise CustomerKeyMismatch(
            "the customer-provided key is not the one this object was encrypted with"
        ) from None


_CHECKSUM_AAD = b"bucketd SSE-C checksum v1\x00"


def _checksum_aead(customer_key: bytes) -> AESGCM:
    return cipher(hashlib.sha256(_CHECKSUM_AAD + customer_key).digest())


def seal_checksum(text: str | None, customer_key: bytes) -> str | None:
    """An SSE-C content's checksum (JSON, `checksums.Checksum`) as the index keeps it: its
    value sealed under a key derived from the customer's. A plaintext's CRC or SHA-256 in
    clear would let whoever reads the index (or a backup) confirm a guess of the content.
    One sealed already (under a key this write does not give) is not kept."""
    if text is None or "value" not in (fields := json.loads(text)):
        return None
    nonce = os.urandom(NONCE_BYTES)
    aad = _CHECKSUM_AAD + fields["algorithm"].encode()
    sealed = _checksum_aead(customer_key).encrypt(nonce, fields.pop("value").encode(), aad)
    return json.dumps(fields | {"sealed": base64.b64encode(nonce + sealed).decode("ascii")})


def open_checksum(text: str | None, customer_key: bytes) -> str | None:
    """The checksum `seal_checksum` sealed, in clear again (one never sealed as it is)."""
    from cryptography.exceptions import InvalidTag

    if text is None or "sealed" not in (fields := json.loads(text)):
        return text
    raw = base64.b64decode(fields.pop("sealed"))
    aad = _CHECKSUM_AAD + fields["algorithm"].encode()
    try:
        value = _checksum_aead(customer_key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad)
    except InvalidTag:
        raise ContentTampered("an SSE-C content's checksum does not open") from None
    return json.dumps(fields | {"value": value.decode("ascii")})

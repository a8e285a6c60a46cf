"""SSE-C: the customer-provided key of a request (`x-amz-server-side-encryption-customer-*`,
or for a copy's source `x-amz-copy-source-server-side-encryption-customer-*`), checked as
S3 checks it before anything is read or written. The key itself goes to the engine, which
seals the content's own key with it and never stores it (`storage/encryption.py`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from storage.encryption import SSE_C, Envelope
from storage.models import FileRecord
from storage.rules.checksums import Checksum
from storage.sse_c import open_checksum

from .errors import S3Error

TARGET = "x-amz-server-side-encryption-customer-"
SOURCE = "x-amz-copy-source-server-side-encryption-customer-"
ALGORITHM = "AES256"


@dataclass(frozen=True)
class CustomerKey:
    key: bytes = field(repr=False)
    md5: str
    """The key's MD5, base64, as the client sent it (echoed on the answer)."""

    def headers(self) -> dict[str, str]:
        """What an answer about an object sealed under this key says of it."""
        return {TARGET + "algorithm": ALGORITHM, TARGET + "key-MD5": self.md5}


def _invalid(message: str) -> S3Error:
    return S3Error("InvalidArgument", message)


def customer_key(headers: Mapping[str, str], prefix: str = TARGET) -> CustomerKey | None:
    """The request's customer key (`prefix`: TARGET, or SOURCE for a copy's source), or
    None when it gives none; 400 InvalidArgument when one of the three headers is missing,
    the algorithm is not AES256, the key is not base64 of 32 bytes, or its MD5 differs."""
    algorithm = headers.get(prefix + "algorithm")
    key = headers.get(prefix + "key")
    md5 = headers.get(prefix + "key-md5")
    if algorithm is None and key is None and md5 is None:
        return None
    if algorithm is None:
        raise _invalid(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide a valid encryption algorithm."
        )
    if algorithm != ALGORITHM:
        raise _invalid("The encryption algorithm specified is not valid: AES256 is the only one.")
    if key is None:
        raise _invalid(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide an appropriate secret key."
        )
    if md5 is None:
        raise _invalid(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide the client calculated MD5 of the secret key."
        )
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise _invalid("The secret key was invalid for the specified algorithm.")
    digest = base64.b64encode(hashlib.md5(raw).digest()).decode("ascii")
    if md5 != digest:
        raise _invalid(
            "The calculated MD5 hash of the key did not match the hash that was provided."
        )
    return CustomerKey(raw, md5)


def write_key(headers: Mapping[str, str]) -> CustomerKey | None:
    """A write's customer key; refused beside `x-amz-server-side-encryption` (one or the
    other, as S3 answers)."""
    found = customer_key(headers)
    if found is not None and headers.get("x-amz-server-side-encryption"):
        raise _invalid(
            "Server Side Encryption with Customer provided key is incompatible with the "
            "encryption method specified"
        )
    return found


def answer_headers(record: FileRecord, given: CustomerKey | None) -> dict[str, str]:
    """SSE-C's answer headers for a version sealed under the request's key, else none."""
    if given is None or record.encryption is None:
        return {}
    if Envelope.decode(record.encryption).algorithm != SSE_C:
        return {}
    return given.headers()


def stored_checksum(record: FileRecord, given: CustomerKey | None) -> Checksum | None:
    """The checksum stored with a version, as a request giving `given` may see it: an
    SSE-C version's is sealed under its customer's key (`sse_c.seal_checksum`)."""
    text = record.checksum if given is None else open_checksum(record.checksum, given.key)
    return Checksum.from_json(text)

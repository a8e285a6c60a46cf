"""Content checksums S3 clients send and ask for: CRC32, CRC32C, CRC64NVME, SHA1, SHA256.

Values travel base64-encoded (big-endian for the CRCs), as S3 has them. The CRCs come from
awscrt, the AWS common runtime (the C code the AWS SDKs use themselves).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256")
WIDTHS = {"CRC32": 4, "CRC32C": 4, "CRC64NVME": 8}
"""Bytes of each CRC."""


@functools.cache
def _crc(algorithm: str) -> Callable[[bytes, int], int]:
    """awscrt's function for a CRC, imported on first use (a server start that meets no
    checksum skips its 30 ms of loading)."""
    from awscrt import checksums

    crc: Callable[[bytes, int], int] = getattr(checksums, algorithm.lower())
    return crc


@functools.cache
def _combine(algorithm: str) -> Callable[[int, int, int], int]:
    from awscrt import checksums

    combine: Callable[[int, int, int], int] = getattr(checksums, f"combine_{algorithm.lower()}")
    return combine


class Hasher:
    """One checksum computed over a stream."""

    def __init__(self, algorithm: str) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {algorithm}")
        self.algorithm = algorithm
        self._crc = 0
        self._hash = hashlib.new(algorithm.lower()) if algorithm.startswith("SHA") else None

    def update(self, data: bytes) -> None:
        if self._hash is not None:
            self._hash.update(data)
        else:
            self._crc = _crc(self.algorithm)(data, self._crc)

    def raw(self) -> bytes:
        if self._hash is not None:
            return self._hash.digest()
        return self._crc.to_bytes(WIDTHS[self.algorithm], "big")

    def value(self) -> str:
        return base64.b64encode(self.raw()).decode("ascii")


@dataclass(frozen=True)
class Checksum:
    """A stored checksum: algorithm, base64 value, and FULL_OBJECT or COMPOSITE."""

    algorithm: str
    value: str
    type: str = "FULL_OBJECT"

    def to_json(self) -> str:
        return json.dumps({"algorithm": self.algorithm, "value": self.value, "type": self.type})

    @classmethod
    def from_json(cls, text: str | None) -> Checksum | None:
        if not text or "value" not in (fields := json.loads(text)):
            return None  # none, or an SSE-C content's, sealed (`sse_c.seal_checksum`)
        return cls(fields["algorithm"], fields["value"], fields.get("type", "FULL_OBJECT"))


def composite(algorithm: str, part_values: list[str]) -> Checksum:
    """S3's checksum of checksums for a multipart object: hash of the parts' raw checksums."""
    hasher = Hasher(algorithm)
    hasher.update(b"".join(base64.b64decode(value) for value in part_values))
    return Checksum(algorithm, f"{hasher.value()}-{len(part_values)}", "COMPOSITE")


def full_object(algorithm: str, parts: list[tuple[str, int]]) -> Checksum:
    """The CRC of a whole multipart object from its parts' CRCs and sizes (no re-read)."""
    combine = _combine(algorithm)
    width = WIDTHS[algorithm]
    crc = 0
    for index, (value, size) in enumerate(parts):
        part = int.from_bytes(base64.b64decode(value), "big")
        crc = part if index == 0 else combine(crc, part, size)
    return Checksum(algorithm, base64.b64encode(crc.to_bytes(width, "big")).decode("ascii"))


def supports_full_object(algorithm: str) -> bool:
    return algorithm in WIDTHS


def upload_type(algorithm: str, asked: str | None) -> str:
    """The checksum type a multipart upload with `algorithm` gets, as AWS has them: the CRCs
    combine into a FULL_OBJECT checksum, the SHAs only into a COMPOSITE one, and CRC64NVME
    only into a FULL_OBJECT one, its default (the others' is COMPOSITE). ValueError for a
    pair AWS refuses."""
    kind = asked or ("FULL_OBJECT" if algorithm == "CRC64NVME" else "COMPOSITE")
    if (kind == "FULL_OBJECT" and not supports_full_object(algorithm)) or (
        kind == "COMPOSITE" and algorithm == "CRC64NVME"
    ):
        raise ValueError(f"{algorithm} has no {kind} checksum type")
    return kind

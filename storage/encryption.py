"""Encryption at rest (issue 37): the format an encrypted content is stored in, and the
master keys that wrap each content's own key.

The format, after MinIO's DARE: the plaintext is cut into packages of 64 KiB (the last one
shorter, and an empty content is one empty package), each sealed alone with AES-256-GCM
under the content's own random 256-bit key, and stored one after the other, each followed
by its 16-byte tag. A package's place is fixed (package `i` starts at `i * 65552`), so a
range read fetches and opens only the packages it covers. The package's number and
whether it is the last are bound into its nonce: a flipped byte, a package moved to
another place, or a content cut after a whole package all fail to open
(`ContentTampered`), never give wrong bytes. Since every content has its own key, the
nonces (package numbers) never repeat under one key.

A content's key is stored wrapped (AES-256-GCM) under a master key (`MasterKeys`), in the
version's `Attributes.encryption` (`Envelope`); rotating the master key rewraps those few
bytes and never rewrites a content. The cipher is the `cryptography` package's (OpenSSL);
nothing here is a cipher written by hand."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .datadir import key_file
from .errors import ContentTampered, EncryptionKeyMissing
from .models import FileRecord

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PACKAGE = 64 * 1024
"""Plaintext bytes per package."""
TAG = 16
SEALED_PACKAGE = PACKAGE + TAG
KEY_BYTES = 32
NONCE_BYTES = 12
_CONTENT_AAD = b"bucketd content v1"
_WRAP_AAD = b"bucketd content key v1"
SSE_S3 = "AES256"
SSE_KMS = "aws:kms"
"""A content whose key is wrapped by a named key of the keyring (`storage/kms.py`)."""
SSE_C = "SSE-C"
"""A content whose key is wrapped by the client's own key (S3's customer-provided keys)."""
CUSTOMER = "customer"
"""An SSE-C envelope's `key_id`: no server key wraps it."""
MASTER_KEY_FILE = "master.key"


def cipher(key: bytes) -> AESGCM:
    # cryptography takes a tenth of a server's start to import: only where a key is used.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def _nonce(number: int, last: bool) -> bytes:
    return number.to_bytes(8, "big") + (b"\x00\x00\x00\x01" if last else bytes(4))


def packages(plain_size: int) -> int:
    """How many packages a content of `plain_size` bytes is stored in (at least one)."""
    return max(1, -(-plain_size // PACKAGE))


def sealed_size(plain_size: int) -> int:
    """The stored size of a content of `plain_size` bytes."""
    return plain_size + TAG * packages(plain_size)


def stored_size(record: FileRecord) -> int:
    """The size of a version's content as the backend holds it."""
    return record.size if record.encryption is None else sealed_size(record.size)


def plain_size(stored_size: int) -> int:
    """The plaintext size of a stored content of `stored_size` bytes."""
    return stored_size - TAG * max(1, -(-stored_size // SEALED_PACKAGE))


@dataclass(frozen=True)
class Span:
    """What a read of plaintext bytes [start, end) fetches: stored bytes
    [stored_start, stored_end), packages `first` onwards, of which the first `skip`
    plaintext bytes are not asked for."""

    first: int
    stored_start: int
    stored_end: int
    skip: int


def span(start: int, end: int, plain_size: int) -> Span:
    """The packages holding plaintext [start, end) of a content of `plain_size` bytes
    (an empty read still opens one package: it proves the content is what was stored)."""
    first = min(start // PACKAGE, packages(plain_size) - 1)
    last = max(first, (end - 1) // PACKAGE)
    stored_end = min((last + 1) * SEALED_PACKAGE, sealed_size(plain_size))
    return Span(first, first * SEALED_PACKAGE, stored_end, start - first * PACKAGE)


Offload = Callable[[Callable[[], bytes]], Awaitable[bytes]]
"""Runs a piece of cipher work off the event loop (a worker thread: OpenSSL releases the
GIL, so the loop sends the previous chunk meanwhile)."""
OFFLOAD_MIN = 256 * 1024
"""Chunks smaller than this are sealed or opened on the loop: a thread hop costs more."""


class Sealing:
    """Seals a stream of plaintext into packages as it arrives."""

    def __init__(self, key: bytes) -> None:
        self._aead = cipher(key)
        self._pending = b""
        self._number = 0

    def feed(self, chunk: bytes) -> bytes:
        """The packages `chunk` completes (a full package is held back until more comes,
        since only the end of the stream says which package is the last)."""
        data = self._pending + chunk if self._pending else chunk
        count = (len(data) - 1) // PACKAGE if data else 0
        view = memoryview(data)
        sealed = b"".join(
            self._aead.encrypt(
                _nonce(self._number + n, False), view[n * PACKAGE : (n + 1) * PACKAGE], _CONTENT_AAD
            )
            for n in range(count)
        )
        self._number += count
        self._pending = bytes(view[count * PACKAGE :])
        return sealed

    def finish(self) -> bytes:
        return self._aead.encrypt(_nonce(self._number, True), self._pending, _CONTENT_AAD)


async def seal_stream(
    key: bytes,
    chunks: AsyncIterator[bytes],
    offload: Offload | None = None,
    observe: Callable[[bytes], None] = lambda _: None,
) -> AsyncIterator[bytes]:
    """The packages of `chunks`; `observe` sees each plaintext chunk first (its hashes),
    in the same thread hop as its sealing."""
    sealing = Sealing(key)

    def feed(chunk: bytes) -> bytes:
        observe(chunk)
        return sealing.feed(chunk)

    async for chunk in chunks:
        if offload is not None and len(chunk) >= OFFLOAD_MIN:
            out = await offload(functools.partial(feed, chunk))
        else:
            out = feed(chunk)
        if out:
            yield out
    yield sealing.finish()


def seal(key: bytes, plain: bytes) -> bytes:
    sealing = Sealing(key)
    return sealing.feed(plain) + sealing.finish()


def open_package(aead: AESGCM, number: int, sealed: bytes | memoryview, total: int) -> bytes:
    from cryptography.exceptions import InvalidTag

    try:
        return aead.decrypt(_nonce(number, number == total - 1), sealed, _CONTENT_AAD)
    except InvalidTag:
        raise ContentTampered(
            f"package {number} of an encrypted content does not open: the stored bytes "
            "were changed, cut or moved"
        ) from None


def open_packages_into(
    aead: AESGCM, first: int, total: int, sealed: memoryview, out: memoryview
) -> int:
    """Opens the consecutive packages `sealed` holds, package `first` onwards of `total`,
    into `out` (at least `len(sealed)` bytes); how many plaintext bytes they gave. Without
    a `bytes` per package: the large reads' path (`services/sealed_range.py`)."""
    from cryptography.exceptions import InvalidTag

    written = 0
    for n, at in enumerate(range(0, len(sealed), SEALED_PACKAGE), first):
        package = sealed[at : at + SEALED_PACKAGE]
        size = len(package) - TAG
        try:
            if size < 0:
                raise InvalidTag
            aead.decrypt_into(
                _nonce(n, n == total - 1), package, _CONTENT_AAD, out[written : written + size]
            )
        except InvalidTag:
            raise ContentTampered(
                f"package {n} of an encrypted content does not open: the stored bytes "
                "were changed, cut or moved"
            ) from None
        written += size
    return written


class Opening:
    """Opens the stored bytes `span(start, end, plain_size)` names, as they arrive, into
    plaintext [start, end)."""

    def __init__(self, key: bytes, start: int, end: int, plain_size: int) -> None:
        where = span(start, end, plain_size)
        self._aead = cipher(key)
        self._total = packages(plain_size)
        self._first = self._number = where.first
        self._expected = -(-(where.stored_end - where.stored_start) // SEALED_PACKAGE)
        self._skip, self._left = where.skip, end - start
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The packages `chunk` completes, opened; one split between chunks is joined alone
        (1 MiB reads never line up with packages: joining whole chunks copied each byte)."""
        view = memoryview(chunk)
        pieces = []
        if self._pending:
            needed = SEALED_PACKAGE - len(self._pending)
            if len(view) < needed:
                self._pending += bytes(view)
                return b""
            pieces.append(self._take(memoryview(self._pending + bytes(view[:needed]))))
            view = view[needed:]
        count = len(view) // SEALED_PACKAGE
        pieces.extend(
            self._take(view[n * SEALED_PACKAGE : (n + 1) * SEALED_PACKAGE]) for n in range(count)
        )
        self._pending = bytes(view[count * SEALED_PACKAGE :])
        return b"".join(pieces)

    def finish(self) -> bytes:
        """The last, shorter package; ContentTampered if packages are missing."""
        out = self._take(memoryview(self._pending)) if self._pending else b""
        if self._number - self._first != self._expected:
            raise ContentTampered("an encrypted content is shorter than its packages")
        return out

    def _take(self, sealed: memoryview) -> bytes:
        plain = open_package(self._aead, self._number, sealed, self._total)
        self._number += 1
        if self._skip or self._left < len(plain):
            plain = plain[self._skip : self._skip + self._left]
            self._skip = 0
        self._left -= len(plain)
        return plain


async def open_stream(
    key: bytes,
    stored: AsyncIterator[bytes],
    start: int,
    end: int,
    plain_size: int,
) -> AsyncIterator[bytes]:
    """Plaintext [start, end) of a content of `plain_size` bytes, from `stored`: the
    stored bytes `span(start, end, plain_size)` names, as the backend streams them.
    Opened on the loop: handing each chunk to a worker thread made a 256 MiB download
    slower, not faster (0.37-0.42 of plaintext's rate against 0.71-0.78 inline, two runs
    each back to back, 2026-11-26 under load), the read-ahead already using those threads.
    A range of a local blob over a MiB is opened in blocks instead (`services/sealed_range.py`:
    reused buffers, opened and sent by one worker thread)."""
    opening = Opening(key, start, end, plain_size)
    async for chunk in stored:
        out = opening.feed(chunk)
        if out:
            yield out
    last = opening.finish()
    if last:
        yield last


def open_all(key: bytes, stored: bytes, plain_size: int) -> bytes:
    """The whole plaintext of a stored content (tests, tools)."""
    aead = cipher(key)
    total = packages(plain_size)
    if len(stored) != sealed_size(plain_size):
        raise ContentTampered("an encrypted content is not the size its packages make")
    pieces = (
        open_package(aead, n, stored[n * SEALED_PACKAGE : (n + 1) * SEALED_PACKAGE], total)
        for n in range(total)
    )
    return b"".join(pieces)


@dataclass(frozen=True)
class Envelope:
    """How a version's content is encrypted, as stored in `Attributes.encryption`."""

    algorithm: str
    """S3's name for it: AES256 (SSE-S3)."""
    key_id: str
    """The master key that wraps the content key (`MasterKeys.key_id`)."""
    wrapped: bytes
    """Nonce and AES-256-GCM of the content key under that master key."""
    content_sha256: str | None = None
    """The plaintext's SHA-256 (the /v1 ETag, which promises the content's, and what a
    client checks a download against); the stored content's is the version's `sha256`."""

    def encode(self) -> str:
        wrapped = base64.b64encode(self.wrapped).decode("ascii")
        fields = {"a": self.algorithm, "k": self.key_id, "w": wrapped, "s": self.content_sha256}
        return json.dumps(fields)

    @classmethod
    def decode(cls, text: str) -> Envelope:
        data = json.loads(text)
        return cls(data["a"], data["k"], base64.b64decode(data["w"]), data.get("s"))


def key_id(master: bytes) -> str:
    """A master key's name: it says which key wraps a content key, and reveals nothing
    of the key."""
    return hashlib.sha256(b"bucketd master key id\x00" + master).hexdigest()[:16]


class MasterKeys:
    """The server's master keys: the current one wraps new content keys; the previous ones
    (after a rotation, until `bucketd rotate-master-key` has rewrapped every key) still
    unwrap old ones."""

    def __init__(self, current: bytes, previous: Iterable[bytes] = ()) -> None:
        for key in (current, *previous):
            if len(key) != KEY_BYTES:
                raise ValueError(f"a master key is {KEY_BYTES} bytes, not {len(key)}")
        self.current_id = key_id(current)
        self._keys = {key_id(k): cipher(k) for k in (*previous, current)}

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> MasterKeys:
        """The data dir's own master key (`master.key`), made the first time it is needed
        (`datadir.key_file`)."""
        return cls(key_file(data_dir, MASTER_KEY_FILE, KEY_BYTES))

    @classmethod
    def load(cls, current: str, previous: Iterable[str] = ()) -> MasterKeys:
        """Keys given as base64 text (the environment) or `@path` of a file holding the
        base64 text or the raw 32 bytes."""
        return cls(_read_key(current), [_read_key(p) for p in previous])

    def new_content_key(self) -> tuple[bytes, Envelope]:
        key = os.urandom(KEY_BYTES)
        return key, self.wrap(key)

    def wrap(self, content_key: bytes, algorithm: str = SSE_S3) -> Envelope:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.current_id].encrypt(nonce, content_key, _WRAP_AAD)
        return Envelope(algorithm, self.current_id, nonce + sealed)

    def unwrap(self, envelope: Envelope) -> bytes:
        from cryptography.exceptions import InvalidTag

        aead = self._keys.get(envelope.key_id)
        if aead is None:
            raise EncryptionKeyMissing(
                f"the master key {envelope.key_id} that wraps this content's key is not "
                "configured (encryption.master_key / previous_master_keys)"
            )
        nonce, sealed = envelope.wrapped[:NONCE_BYTES], envelope.wrapped[NONCE_BYTES:]
        try:
            return aead.decrypt(nonce, sealed, _WRAP_AAD)
        except InvalidTag:
            raise ContentTampered("a content's wrapped key does not open") from None

    def rewrap(self, envelope: Envelope) -> Envelope | None:
        """The envelope under the current master key; None when it is under it already,
        or under a customer's key (SSE-C) or a keyring's (SSE-KMS), which no master key
        wraps."""
        if envelope.key_id == self.current_id or envelope.algorithm in (SSE_C, SSE_KMS):
            return None
        moved = self.wrap(self.unwrap(envelope), envelope.algorithm)
        return replace(moved, content_sha256=envelope.content_sha256)


def _read_key(text: str) -> bytes:
    if text.startswith("@"):
        raw = Path(text[1:]).read_bytes()
        if len(raw) == KEY_BYTES:
            return raw
        text = raw.decode("ascii").strip()
    try:
        return base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raise ValueError("a master key is base64 of 32 random bytes, or @file") from None


def generate_key() -> str:
    """A new master key, as base64 text (`bucketd new-master-key`)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")

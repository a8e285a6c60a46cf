"""Encrypted contents (issue 37): a write sealed on its way to the backend, a read opened
on its way out, and the rotation that rewraps content keys under a new master key. The
format and the keys are `storage/encryption.py`'s; what the backend and the index hold is
the packages and the envelope, never a plaintext byte nor a content key in the clear."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from storage import encryption
from storage.attributes import Attributes
from storage.backends.commits import Commits
from storage.models import Bucket, FileRecord, StoredBlob, WriteOptions

Opener = Callable[[FileRecord, int, int], Awaitable[AsyncIterator[bytes]]]


class SealedContents:
    def __init__(
        self, commits: Commits, data_dir: Path, keys: encryption.MasterKeys | None
    ) -> None:
        self._commits = commits
        self._data_dir = data_dir
        self._keys = keys

    @property
    def keys(self) -> encryption.MasterKeys:
        """The configured master keys, else the data dir's own (`master.key`, made the
        first time one is needed)."""
        if self._keys is None:
            self._keys = encryption.MasterKeys.for_data_dir(self._data_dir)
        return self._keys

    async def store(
        self,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        stream: AsyncIterator[bytes],
        options: WriteOptions,
    ) -> tuple[Attributes, StoredBlob]:
        """Store a stream encrypted: only its packages reach the backend, which addresses
        them by their own SHA-256 (so equal plaintexts never share a stored content); the
        plaintext's size and MD5 (the S3 ETag, as AWS gives for SSE-S3) are counted on the
        way."""
        content_key, envelope = self.keys.new_content_key()
        md5 = hashlib.md5() if options.md5 else None
        size = 0

        async def plaintext() -> AsyncIterator[bytes]:
            nonlocal size
            async for chunk in stream:
                size += len(chunk)
                if md5 is not None:
                    md5.update(chunk)
                yield chunk

        sealed = encryption.seal_stream(content_key, plaintext())
        blob = await self._commits.store(bucket, key, attrs.content_type, sealed)
        blob = replace(blob, plain_size=size, md5=None if md5 is None else md5.hexdigest())
        return replace(attrs, encryption=envelope.encode()), blob

    async def open(
        self, record: FileRecord, start: int, end: int, open_stored: Opener
    ) -> AsyncIterator[bytes]:
        """Plaintext [start, end) of an encrypted content, reading only its packages that
        hold it (`open_stored` reads stored bytes)."""
        assert record.encryption is not None
        content_key = self.keys.unwrap(encryption.Envelope.decode(record.encryption))
        where = encryption.span(start, end, record.size)
        stored = await open_stored(record, where.stored_start, where.stored_end)
        return encryption.open_stream(content_key, stored, start, end, record.size)

"""Encrypted contents (issue 37): a write sealed on its way to the backend, a read opened
on its way out, and the rotation that rewraps content keys under a new master key. The
format and the keys are `storage/encryption.py`'s; what the backend and the index hold is
the packages and the envelope, never a plaintext byte nor a content key in the clear."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path

from storage import encryption
from storage.attributes import Attributes
from storage.backends.commits import Commits
from storage.errors import ContentTampered, EncryptionKeyMissing
from storage.faults import Faults
from storage.index import Index, envelopes
from storage.models import Bucket, FileRecord, StoredBlob, WriteOptions
from storage.rules.limits import prepend

Opener = Callable[[FileRecord, int, int], Awaitable[AsyncIterator[bytes]]]
ROTATION_BATCH = 100
"""Envelopes rewrapped per transaction by a rotation."""


@dataclass
class Rotation:
    envelopes: int = 0
    """Distinct envelopes (content keys) seen."""
    rewrapped: int = 0
    """Of them, rewrapped under the current master key by this run."""
    rows: int = 0
    """Version rows changed."""


class SealedContents:
    def __init__(
        self,
        index: Index,
        commits: Commits,
        data_dir: Path,
        keys: encryption.MasterKeys | None,
        faults: Faults,
        executor: Executor,
    ) -> None:
        self._executor = executor
        self._index = index
        self._faults = faults
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

    async def _usable_keys(self) -> encryption.MasterKeys:
        """`keys`, except that a data dir whose master.key is gone while the index holds
        content keys (deleted, not restored with the index, or another gateway's data dir
        over a shared index) gets no new one: it would never open those, and the contents
        sealed under it would need a key of their own once the old one is back."""
        lost = self._keys is None and not (self._data_dir / encryption.MASTER_KEY_FILE).exists()
        if lost and len(await self._index.run(envelopes.envelopes_after, "", 1)) > 0:
            raise EncryptionKeyMissing(
                f"the data dir has no {encryption.MASTER_KEY_FILE} but the index holds "
                "content keys wrapped by one: put it back (a backup has it) or configure "
                "storage.master_key; a new one would not open them"
            )
        return self.keys

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
        content_key, envelope = (await self._usable_keys()).new_content_key()
        md5 = hashlib.md5() if options.md5 else None
        sha256 = hashlib.sha256()
        size = 0

        def observe(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)
            sha256.update(chunk)
            if md5 is not None:
                md5.update(chunk)

        sealed = encryption.seal_stream(content_key, stream, self._offload, observe)
        blob = await self._commits.store(bucket, key, attrs.content_type, sealed)
        blob = replace(blob, plain_size=size, md5=None if md5 is None else md5.hexdigest())
        envelope = replace(envelope, content_sha256=sha256.hexdigest())
        return replace(attrs, encryption=envelope.encode()), blob

    async def _offload(self, work: Callable[[], bytes]) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def open(
        self, record: FileRecord, start: int, end: int, open_stored: Opener
    ) -> AsyncIterator[bytes]:
        """Plaintext [start, end) of an encrypted content, reading only its packages that
        hold it (`open_stored` reads stored bytes)."""
        assert record.encryption is not None
        keys = await self._usable_keys()
        content_key = keys.unwrap(encryption.Envelope.decode(record.encryption))
        where = encryption.span(start, end, record.size)
        stored = await open_stored(record, where.stored_start, where.stored_end)
        plaintext = encryption.open_stream(content_key, stored, start, end, record.size)
        # The first package opened before the answer starts: a content that fails it is an
        # error status, not a 200 cut short.
        return prepend(await anext(plaintext, b""), plaintext)

    async def rotate(
        self, progress: Callable[[Rotation], None] = lambda _: None, batch: int = ROTATION_BATCH
    ) -> Rotation:
        """Rewrap every content key not under the current master key (`storage.master_key`;
        the old one among `previous_master_keys`), never touching a content. Each batch is
        one transaction and each row a compare-and-set, so a run stopped anywhere (SIGKILL
        included) leaves every envelope under the old key or the new one, both readable,
        and running it again finishes the work."""
        report = Rotation()
        after = ""
        while True:
            page = await self._index.run(envelopes.envelopes_after, after, batch)
            if not page:
                return report
            changes = []
            for text in page:
                rewrapped = self.keys.rewrap(encryption.Envelope.decode(text))
                if rewrapped is not None:
                    changes.append((text, rewrapped.encode()))
            if changes:
                report.rows += await self._index.run(envelopes.rewrap, changes)
            report.envelopes += len(page)
            report.rewrapped += len(changes)
            self._faults.hit("rotate.after_batch")
            progress(report)
            after = page[-1]

    async def check_keys(self) -> list[str]:
        """What `bucketd check` says of the content keys: those no configured master key
        unwraps (a previous key dropped before its rotation finished, another key set,
        master.key lost) and those whose wrapping was changed. Their objects answer 500 to
        every read; the check says so before a reader does. It makes no master.key."""
        keys = self._keys
        if keys is None and (self._data_dir / encryption.MASTER_KEY_FILE).exists():
            keys = self.keys
        missing: dict[str, int] = {}
        changed = 0
        after = ""
        while page := await self._index.run(envelopes.envelopes_after, after, ROTATION_BATCH):
            for text in page:
                envelope = encryption.Envelope.decode(text)
                try:
                    if keys is None:
                        raise EncryptionKeyMissing(envelope.key_id)
                    keys.unwrap(envelope)
                except EncryptionKeyMissing:
                    missing[envelope.key_id] = missing.get(envelope.key_id, 0) + 1
                except ContentTampered:
                    changed += 1
            after = page[-1]
        problems = [
            f"master key {key}: wraps {count} content keys but is not configured "
            "(storage.master_key / previous_master_keys): their objects cannot be read"
            for key, count in sorted(missing.items())
        ]
        if changed:
            problems.append(f"{changed} content keys do not open: their envelopes were changed")
        return problems

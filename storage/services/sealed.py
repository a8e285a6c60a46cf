"""Encrypted contents (issue 37): a write sealed on its way to the backend, a read opened
on its way out, and the rotation that rewraps content keys under a new master key. The
format and the keys are `storage/encryption.py`'s; what the backend and the index hold is
the packages and the envelope, never a plaintext byte nor a content key in the clear."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace

from storage import encryption, kms, sse_c
from storage.attributes import Attributes
from storage.backends.commits import Commits
from storage.bodies import OpenRange
from storage.config import EngineConfig
from storage.errors import (
    ContentTampered,
    CustomerKeyNotApplicable,
    CustomerKeyRequired,
    EncryptionKeyMissing,
)
from storage.faults import Faults
from storage.index import Index, envelopes
from storage.models import Bucket, FileRecord, StoredBlob, WriteOptions
from storage.rules.limits import prepend
from storage.services.sealed_range import SealedRange

Opener = Callable[[FileRecord, int, int], Awaitable[AsyncIterator[bytes]]]
_NOT_SEALED_FOR_CUSTOMER = (
    "the object is not encrypted with a customer-provided key: send no "
    "x-amz-server-side-encryption-customer-* headers to read it"
)
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
        config: EngineConfig,
        keys: encryption.MasterKeys | None,
        faults: Faults,
        executor: Executor,
    ) -> None:
        self.keyring = kms.keyring(config.storage.kms_keys, config.storage.kms_default_key)
        self._executor = executor
        self._index = index
        self._faults = faults
        self._commits = commits
        self._data_dir = config.data_dir
        self._keys = keys

    @property
    def keys(self) -> encryption.MasterKeys:
        """The configured master keys, else the data dir's own (`master.key`, made the
        first time one is needed)."""
        if self._keys is None:
            self._keys = encryption.MasterKeys.for_data_dir(self._data_dir)
        return self._keys

    async def _guard_master_key(self) -> None:
        """A data dir whose master.key is gone while the index holds content keys
        (deleted, not restored with the index, or another gateway's data dir over a shared
        index) gets no new one: it would never open those, and the contents sealed under it
        would need a key of their own once the old one is back. Costs a stat until a key
        is loaded, and an index read only when the file is missing."""
        lost = self._keys is None and not (self._data_dir / encryption.MASTER_KEY_FILE).exists()
        if lost and await self._master_wrapped_exist():
            raise EncryptionKeyMissing(
                f"the data dir has no {encryption.MASTER_KEY_FILE} but the index holds "
                "content keys wrapped by one: put it back (a backup has it) or configure "
                "storage.master_key; a new one would not open them"
            )

    async def _master_wrapped_exist(self) -> bool:
        """Whether the index holds a content key a master key wraps (not a keyring's or a
        customer's): read page by page, only while no master key is loaded."""
        async for page in self._pages():
            if any(encryption.Envelope.decode(t).algorithm == encryption.SSE_S3 for t in page):
                return True
        return False

    async def _pages(self, batch: int = ROTATION_BATCH) -> AsyncIterator[list[str]]:
        """Every distinct envelope in the index, a page at a time, in their order."""
        after = ""
        while page := await self._index.run(envelopes.envelopes_after, after, batch):
            yield page
            after = page[-1]

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
        way. Under a customer's key (SSE-C) the content key is sealed by that key instead,
        and the ETag is not the plaintext's MD5 (as S3's is not for SSE-C): it is taken from
        the stored packages' SHA-256, so it says nothing of the plaintext."""
        customer = options.customer_key
        if customer is None and not kms.is_kms(options.encryption):
            await self._guard_master_key()
        if customer is None:
            content_key, envelope = self.new_content_key(options.encryption)
        else:
            content_key = os.urandom(encryption.KEY_BYTES)
            envelope = sse_c.wrap_for_customer(content_key, customer)
        md5 = hashlib.md5() if options.md5 and customer is None else None
        given = options.plain_sha256 if customer is None else None
        sha256 = hashlib.sha256() if customer is None and given is None else None
        size = 0

        def observe(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)
            if sha256 is not None:
                sha256.update(chunk)
            if md5 is not None:
                md5.update(chunk)

        sealed = encryption.seal_stream(content_key, stream, self.offload, observe)
        blob = await self._commits.store(bucket, key, attrs.content_type, sealed)
        etag = (
            blob.sha256[:32] if customer is not None else None if md5 is None else md5.hexdigest()
        )
        blob = replace(blob, plain_size=size, md5=etag)
        if customer is None:  # SSE-C keeps no fingerprint of the plaintext
            plain = given() if given is not None else sha256.hexdigest() if sha256 else None
            envelope = replace(envelope, content_sha256=plain)
        return replace(attrs, encryption=envelope.encode()), blob

    def new_content_key(self, asked: str | None) -> tuple[bytes, encryption.Envelope]:
        """A content key for a write asking `asked` (aws:kms: the keyring's key, else the
        master key), and its envelope."""
        if kms.is_kms(asked):
            return self.keyring.new_content_key(asked or "")
        return self.keys.new_content_key()

    def unwrap(self, envelope: encryption.Envelope) -> bytes:
        """A server-wrapped (SSE-S3 or SSE-KMS) content key."""
        if envelope.algorithm == encryption.SSE_KMS:
            return self.keyring.unwrap(envelope)
        return self.keys.unwrap(envelope)

    async def offload(self, work: Callable[[], bytes]) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def check(self, record: FileRecord, customer_key: bytes | None) -> None:
        """That a read gives the customer key the content is sealed under (SSE-C), and
        none for any other content: CustomerKeyRequired, CustomerKeyMismatch or
        CustomerKeyNotApplicable, before a byte is read (a HEAD answers as its GET would)."""
        if record.encryption is None:
            if customer_key is not None:
                raise CustomerKeyNotApplicable(_NOT_SEALED_FOR_CUSTOMER)
        elif customer_key is not None or sse_c.is_customer(record.encryption):
            self.content_key(record, customer_key)  # an SSE-S3 key needs no unwrap to check

    def content_key(self, record: FileRecord, customer_key: bytes | None) -> bytes:
        """An encrypted content's own key: unwrapped by the master key, or for SSE-C by the
        customer's (CustomerKeyRequired without one, CustomerKeyMismatch under another).
        A customer's key given for a content it does not wrap is refused too, as S3 does:
        the client believes the object sealed when it is not."""
        assert record.encryption is not None
        envelope = encryption.Envelope.decode(record.encryption)
        if envelope.algorithm != encryption.SSE_C:
            if customer_key is not None:
                raise CustomerKeyNotApplicable(_NOT_SEALED_FOR_CUSTOMER)
            return self.unwrap(envelope)
        if customer_key is None:
            raise CustomerKeyRequired(
                "the object is encrypted with a customer-provided key (SSE-C): only a "
                "request that gives that key (S3's x-amz-server-side-encryption-customer-* "
                "headers) reads it"
            )
        return sse_c.unwrap_for_customer(envelope, customer_key)

    async def open(
        self,
        record: FileRecord,
        start: int,
        end: int,
        open_stored: Opener,
        customer_key: bytes | None = None,
    ) -> AsyncIterator[bytes]:
        """Plaintext [start, end) of an encrypted content, reading only its packages that
        hold it (`open_stored` reads stored bytes)."""
        assert record.encryption is not None
        if encryption.Envelope.decode(record.encryption).algorithm == encryption.SSE_S3:
            await self._guard_master_key()
        content_key = self.content_key(record, customer_key)
        where = encryption.span(start, end, record.size)
        stored = await open_stored(record, where.stored_start, where.stored_end)
        if isinstance(stored, OpenRange):
            opened = SealedRange(stored, content_key, start, end, record.size, self._executor)
            return await opened.start()
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
        async for page in self._pages(batch):
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
        return report

    async def check_keys(self) -> list[str]:
        """What `bucketd check` says of the content keys: those no configured key unwraps
        (a previous master key dropped before its rotation finished, another key set,
        master.key lost, a keyring key removed) and those whose wrapping was changed. Their
        objects answer 500 to every read; the check says so before a reader does. It makes
        no master.key; an SSE-C content key opens only under its customer's key, unseen."""
        keys = self._keys
        if keys is None and (self._data_dir / encryption.MASTER_KEY_FILE).exists():
            keys = self.keys
        missing: dict[str, int] = {}
        changed = 0
        async for page in self._pages():
            for text in page:
                envelope = encryption.Envelope.decode(text)
                try:
                    if envelope.algorithm == encryption.SSE_KMS:
                        self.keyring.unwrap(envelope)
                    elif envelope.algorithm == encryption.SSE_C:
                        continue
                    elif keys is None:
                        raise EncryptionKeyMissing(envelope.key_id)
                    else:
                        keys.unwrap(envelope)
                except EncryptionKeyMissing:
                    missing[envelope.key_id] = missing.get(envelope.key_id, 0) + 1
                except ContentTampered:
                    changed += 1
        problems = [
            f"key {key}: wraps {count} content keys but is not configured "
            "(storage.master_key / previous_master_keys / kms_keys): their objects cannot be read"
            for key, count in sorted(missing.items())
        ]
        if changed:
            problems.append(f"{changed} content keys do not open: their envelopes were changed")
        return problems

"""Reaping a blob while other processes write the same content (`storage/backends/local/blobs.py`).

Two `LocalBackend`s over one data dir stand for two processes: `flock` locks belong to open
file descriptions, so two stores in one process contend exactly as two workers do.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from storage.backends.local.blobs import LocalBackend
from storage.faults import Faults
from storage.models import Bucket, StoredBlob

BUCKET = Bucket(
    id="b",
    org_id="o",
    name="b",
    region="local",
    status="ready",
    status_reason=None,
    created_at="",
    max_upload_bytes=1 << 20,
    allowed_content_types=(),
    file_count=0,
    size_bytes=0,
)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[LocalBackend, LocalBackend]]:
    with ThreadPoolExecutor(4) as executor:
        yield (
            LocalBackend(tmp_path, True, executor, Faults()),
            LocalBackend(tmp_path, True, executor, Faults()),
        )


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _write(store: LocalBackend, data: bytes) -> StoredBlob:
    return asyncio.run(store.write(BUCKET, "k", "text/plain", _body(data)))


def test_a_claim_keeps_a_write_of_the_same_content_from_placing_until_it_is_done(
    stores: tuple[LocalBackend, LocalBackend],
) -> None:
    """The reaper locks, then asks the index, then unlinks: a write of the content meanwhile
    waits, and places a file of its own once the old one is gone."""
    reaper, writer = stores
    data = os.urandom(100)
    blob = _write(reaper, data)
    reaper.release_hold(blob)
    placed: list[StoredBlob] = []
    with reaper.claim([blob.blob_id]) as claim:
        assert claim.blob_ids == [blob.blob_id]
        thread = threading.Thread(target=lambda: placed.append(_write(writer, data)))
        thread.start()
        thread.join(0.3)
        assert thread.is_alive() and placed == []
        claim.reap(claim.blob_ids)
    thread.join(5)
    assert placed and placed[0].blob_id == blob.blob_id
    assert writer.blob_path(blob.blob_id).read_bytes() == data
    assert reaper.claim([blob.blob_id]).blob_ids == []  # the writer holds it until its commit
    assert reaper.held_elsewhere() == [blob.blob_id]


def test_a_claim_that_reaps_nothing_leaves_the_file_and_lets_go(
    stores: tuple[LocalBackend, LocalBackend],
) -> None:
    """The index found a new reference after the claim: the file stays, unlocked."""
    reaper, writer = stores
    data = os.urandom(100)
    blob = _write(reaper, data)
    reaper.release_hold(blob)
    with reaper.claim([blob.blob_id]) as claim:
        claim.reap([])
    again = _write(writer, data)
    assert again.blob_id == blob.blob_id
    assert writer.blob_path(blob.blob_id).read_bytes() == data


def test_a_blob_held_here_is_deferred_and_one_gone_is_not_claimed(
    stores: tuple[LocalBackend, LocalBackend],
) -> None:
    store, _ = stores
    blob = _write(store, os.urandom(100))
    with store.claim([blob.blob_id, "0" * 64]) as claim:
        assert claim.blob_ids == []
    assert store.release_hold(blob)  # the put-off reap is to be tried again now
    with store.claim([blob.blob_id]) as claim:
        claim.reap(claim.blob_ids)
    assert not store.blob_path(blob.blob_id).exists()


def test_a_write_waiting_on_a_claim_leaves_the_store_to_others(
    stores: tuple[LocalBackend, LocalBackend],
) -> None:
    """A claim may be held across an await (the PostgreSQL driver asks the index then): a
    write of that content waits without holding the store's lock, so other writes, and the
    next claim on the same event loop, go on."""
    store, _ = stores
    data = os.urandom(100)
    blob = _write(store, data)
    store.release_hold(blob)
    placed: list[StoredBlob] = []
    others: list[list[str]] = []

    def other_work() -> None:
        other = _write(store, os.urandom(10))
        store.release_hold(other)
        with store.claim([other.blob_id]) as second:
            others.append(second.blob_ids)

    with store.claim([blob.blob_id]) as claim:
        waiting = threading.Thread(target=lambda: placed.append(_write(store, data)))
        waiting.start()
        waiting.join(0.2)
        assert waiting.is_alive()
        meanwhile = threading.Thread(target=other_work)
        meanwhile.start()
        meanwhile.join(5)
        assert len(others) == 1 and len(others[0]) == 1  # not stuck behind the waiting write
        claim.reap(claim.blob_ids)
    waiting.join(5)
    assert placed and store.blob_path(blob.blob_id).read_bytes() == data

"""A hostile review of the S3 write leases (storage/backends/s3/settle.py): what a bad
reservation row or a writer stalled past its lease does to the reads and writes of its key,
against PostgreSQL and SeaweedFS with two engines (as tests/test_write_leases.py)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from storage.attributes import Attributes
from storage.config import EngineConfig
from storage.engine import Engine
from storage.errors import BackendUnavailable, FileNotFound, StorageError, WriteSettled
from storage.index import reservations
from storage.index.sql import Script, run, write
from storage.models import Actor, FileRecord
from tests.support.engine import chunks, read_through
from tests.support.engines import OnItsOwnLoop, organization_with_bucket
from tests.support.leases import (
    LEASE,
    leased,
    past_its_lease,
    stalled,
    stalled_put,
    two_gateways,
    until_read,
    until_reserved,
)
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # PostgreSQL and SeaweedFS

SENT = Attributes("text/markdown", metadata=json.dumps({"colour": "blue"}))


@write
def overwrite_commit_with(key: str, text: str) -> Script[None]:
    yield run("UPDATE reservations SET commit_with = ? WHERE key = ?", text, key)


async def cut_off(engine_config: EngineConfig, actor: Actor, bucket_id: str, key: str) -> None:
    """Write `key` through a gateway whose write dies right after its publish."""
    dying = await Engine.open(leased(engine_config, "put.after_publish=raise"))
    try:
        with pytest.raises(RuntimeError, match="injected fault"):
            await dying.files.put(actor, bucket_id, key, SENT, chunks(b"cut off " + key.encode()))
    finally:
        await dying.close()


async def test_a_reader_settles_a_write_whose_commit_with_is_not_json(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A row whose `commit_with` does not decode (damaged, or written by another version of
    bucketd) made every read of its key fail with a JSONDecodeError (a 500), and every write
    of it too, forever: the write is settled with what its row's columns say instead."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_off(config_a, actor, bucket_id, "k")
        await b._index.run(overwrite_commit_with, "k", "{not json")
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"cut off k"
        assert record.content_type == SENT.content_type  # its own column
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


async def test_heal_goes_past_a_write_whose_commit_with_has_another_shape(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """heal settles the lapsed writes in the order they were made: one whose `commit_with`
    names an attribute this version does not know raised a TypeError out of heal, which
    killed the janitor (it survives StorageError only): no write behind it was ever settled,
    and no abandoned upload expired again."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_off(config_a, actor, bucket_id, "k")
        await cut_off(config_a, actor, bucket_id, "k2")
        shape = '{"attrs": {"future_column": 1}, "event": "put"}'
        await b._index.run(overwrite_commit_with, "k", shape)
        await asyncio.sleep(LEASE)
        await b._commits.heal(time.time() - 3600)
        k2 = await b.files.get(actor, bucket_id, "k2")  # committed by heal: no reread
        assert (k2.content_type, k2.metadata) == (SENT.content_type, SENT.metadata)
        k = await b.files.get(actor, bucket_id, "k")
        assert k.content_type == SENT.content_type
        _, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"cut off k"
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


async def test_a_writer_stalled_past_its_lease_before_publishing_loses_no_newer_write(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A's loop stalls 1.5 s (a GC pause, SIGSTOP, or its index unreachable) between its
    lease's last check and its publish, with a lease of 0.3 s. B's write of the key finds
    A's reservation lapsed and unpublished, releases it, and commits "newer" (answered
    200). A then woke and published over it: the index named B's object, the cluster held
    A's, and the key read 404 for good, an acknowledged write lost. A's publish is now
    fenced (If-Match on what the cluster held when A reserved) and fails instead."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    other = stalled_put(config_a, "put.before_publish", actor, bucket_id, b"stalled", SENT)
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
        newer = await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"newer"))
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, WriteSettled), a_said  # B's was answered before A published
        _, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"newer"
        assert (await b.files.get(actor, bucket_id, "k")).version_id == newer.version_id
        assert await b.maintenance.check_consistency() == []
    finally:
        other.thread.join(30)
        await b.close()


async def test_a_writer_settled_then_overwritten_does_not_answer_a_definite_refusal(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A stalls between its publish and its commit past its lease; B's reader settles A's
    write (and reads it), then B overwrites the key. A's commit finds its reservation gone
    and the key's record another's: it answered WriteSettled, a 409, which a client (and the
    linearizability checker) takes for "took no effect" - yet its value was read. A cannot
    tell a settled commit from a release there: the outcome is unknown, a 503."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    other = stalled_put(config_a, "put.after_publish", actor, bucket_id, b"slow", SENT)
    answered = other.answered
    try:
        await until_read(b, actor, bucket_id, b"slow")
        await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"newer"))
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, FileRecord | BackendUnavailable), a_said
        assert (await read_through(b, actor, bucket_id, "k"))[1] == b"newer"
        assert await b.maintenance.check_consistency() == []
    finally:
        other.thread.join(30)
        await b.close()


async def test_a_writer_released_while_stalled_before_publishing_leaves_the_key_readable(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """As above, but no later write: heal finds A's lapsed reservation with nothing of A's
    in the cluster and releases it; A wakes and publishes over the old object (its fence
    holds: nothing replaced it). Its commit found the reservation gone and gave up, leaving
    the old record naming an object the cluster no longer held: the key read 404 until its
    next write. A now claims the key again and commits its object."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    other = stalled_put(config_a, "put.before_publish", actor, bucket_id, b"stalled", SENT)
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
        await b._commits.heal(time.time() - 3600)
        assert await b._index.run(reservations.on_key, bucket_id, "k") == []  # released
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, FileRecord), a_said
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"stalled" and record.version_id == a_said.version_id
        assert (record.content_type, record.metadata) == (SENT.content_type, SENT.metadata)
        assert (await b.orgs.get(actor.org_id)).stored_bytes == len(b"stalled")
        assert await b.maintenance.check_consistency() == []
    finally:
        other.thread.join(30)
        await b.close()


async def test_a_write_over_an_orphan_object_goes_through_its_fence(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """The fence is the ETag the key's record names; an object the cluster holds without a
    record (left by a failed delete) is not another write's: the write publishes over it
    once it has seen it under its live reservation, instead of failing for good."""
    _, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        location = (await b.buckets.get(actor, bucket_id)).location
        await asyncio.to_thread(
            seaweed.client().put_object, Bucket=location, Key="orphan", Body=b"left"
        )
        await b.files.put(actor, bucket_id, "orphan", SENT, chunks(b"written"))
        assert (await read_through(b, actor, bucket_id, "orphan"))[1] == b"written"
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


async def test_a_reader_without_access_neither_settles_nor_waits_on_a_write(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """Another organization's reader of a key with a lapsed write is refused before any
    settling (the access decision comes with the lookup, the settling only after an open
    that failed), at once: no wait that would tell it someone writes the key."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_off(config_a, actor, bucket_id, "k")
        await asyncio.sleep(LEASE)  # lapsed: the next permitted reader would settle it
        outsider, _ = await organization_with_bucket(b)
        started = time.monotonic()
        with pytest.raises(StorageError) as refused:
            await read_through(b, outsider, bucket_id, "k")
        assert not isinstance(refused.value, BackendUnavailable)
        assert time.monotonic() - started < 0.5
        assert len(await b._index.run(reservations.on_key, bucket_id, "k")) == 1  # unsettled
    finally:
        await b.close()


@pytest.mark.parametrize("lease", [5.0, LEASE], ids=["live", "lapsed"])
async def test_a_delete_racing_a_write_between_publish_and_commit_leaves_no_record_without_bytes(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, lease: float
) -> None:
    """A publishes its overwrite of `k`, then stalls 1 s before its commit; B deletes `k`
    meanwhile. The delete took no claim on the key's object: it removed the old record,
    then the object under the key (A's), and A's commit then named an object the cluster no
    longer held (a 500 on every read, `check --deep` inconsistent). A delete now claims the
    key's object as a write does: it waits for A's commit while A's lease lives (A's value
    then goes), or settles A's lapsed write first (with a 0.3 s lease)."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    slow = leased(config_a, "put.after_publish=sleep:1", lease)
    other = OnItsOwnLoop(slow, lambda a: a.files.put(actor, bucket_id, "k", SENT, chunks(b"slow")))
    answered = other.answered
    try:
        await until_reserved(b, bucket_id, "k")
        await asyncio.sleep(lease if lease < 1 else 0.2)  # published (or lapsed), uncommitted
        await b.files.delete(actor, bucket_id, "k")
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, FileRecord | BackendUnavailable), a_said
        assert await b.maintenance.check_consistency() == []
        with pytest.raises(FileNotFound):  # A's write came before the delete
            await b.files.get(actor, bucket_id, "k")
    finally:
        other.thread.join(30)
        await b.close()


async def test_a_copy_stalled_past_its_lease_loses_no_newer_write(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """As the stalled writer above, with a server-side copy: A's copy onto `k` stalls 1.5 s
    before its CopyObject with a lease of 0.3 s, B writes "newer" meanwhile (A's lapsed
    reservation released). CopyObject took no condition on its destination: A's copy
    replaced B's acknowledged object under B's record (the key read 404 for good). It is
    now fenced as a publish is (IfMatch/IfNoneMatch on CopyObject, which SeaweedFS
    honours) and fails instead."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    await b.files.put(actor, bucket_id, "src", SENT, chunks(b"copied"))
    source = await b.files.get(actor, bucket_id, "src")  # with its bucket's location
    other = stalled(
        config_a, "copy.before_copy", lambda a: a.files.copy(actor, source, bucket_id, "k", SENT)
    )
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
        newer = await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"newer"))
        await other.ended()
        _, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"newer"
        assert (await b.files.get(actor, bucket_id, "k")).version_id == newer.version_id
        assert await b.maintenance.check_consistency() == []
        [a_said] = answered
        assert isinstance(a_said, WriteSettled), a_said  # 409: it took no effect
    finally:
        other.thread.join(30)
        await b.close()

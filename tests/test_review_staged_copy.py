"""A hostile review of the staged copy on the S3 backend (e183be2): a copy whose ETag is
known only once copied (here an encrypted source's) goes first to
`.bucketd-staging/<token>`, its ETag named in the reservation, then onto the key. Attacked
as a crash (a gateway cut off at each step), as a stalled writer whose lease lapsed while
another gateway settled its write, and as a tenant naming keys like the staged objects."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from storage.attributes import Attributes, copied
from storage.engine import Engine
from storage.errors import BackendUnavailable, WriteSettled
from storage.models import Actor, FileRecord
from tests.support.engine import chunks, read_through
from tests.support.engines import OnItsOwnLoop
from tests.support.leases import LEASE, leased, two_gateways, until_reserved
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer
from tests.test_write_leases import sealed_source, staged_objects

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # PostgreSQL and SeaweedFS


async def counted(b: Engine, actor: Actor, bucket_id: str) -> tuple[int, int, int]:
    """The org's stored bytes, the bucket's file count and size."""
    bucket = await b.buckets.get(actor, bucket_id)
    stored = (await b.orgs.get(actor.org_id)).stored_bytes
    return stored, bucket.file_count, bucket.size_bytes


async def test_a_settled_sealed_copy_is_the_copy_its_writer_would_have_committed(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """Gateway A is cut off right after its copy of an encrypted source onto `k`; B's
    reader settles it. The record B commits must be the one A would have: the source's
    (plaintext) MD5 as its S3 ETag, the same sizes, the same counters. The settler derived
    the MD5 from the cluster's ETag, the ciphertext's: a settled copy showed clients an
    ETag no uncut copy of the same source has."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        source = await sealed_source(b, actor, bucket_id, b"sealed content")
        before = await counted(b, actor, bucket_id)
        whole = await b.files.copy(actor, source, bucket_id, "whole", copied(source))
        after = await counted(b, actor, bucket_id)
        dying = await Engine.open(leased(config_a, "copy.after_copy=raise"))
        try:
            with pytest.raises(RuntimeError, match="injected fault"):
                await dying.files.copy(actor, source, bucket_id, "k", copied(source))
        finally:
            await dying.close()
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"sealed content"
        assert record.md5 == whole.md5 == source.md5
        assert await b.files.s3_etag(record) == await b.files.s3_etag(whole)
        assert (record.size, record.sha256) == (whole.size, whole.sha256)
        # k's copy replaced "old" (3 bytes): it counts as "whole"'s copy did, less those
        copy_cost = (after[0] - before[0], after[2] - before[2])
        settled = await counted(b, actor, bucket_id)
        assert (settled[0] - after[0], settled[2] - after[2]) == (
            copy_cost[0] - 3,
            copy_cost[1] - 3,
        )
        assert settled[1] == after[1]
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


async def test_a_stalled_copy_settled_by_a_reader_answers_with_what_was_settled(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A stalls right after its staged copy landed on `k`, past its lease; B's reader
    settles A's write (the cluster holds the ETag its reservation names) and reads it. A
    wakes, its commit finds the reservation gone, and looks whether the key's record is its
    copy: it is, so A answers with it, not with a 503 that says the outcome is unknown."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    source = await sealed_source(b, actor, bucket_id, b"sealed content")
    stalled = leased(config_a, "copy.after_copy=sleep:1.5")
    other = OnItsOwnLoop(
        stalled, lambda a: a.files.copy(actor, source, bucket_id, "k", copied(source))
    )
    answered = other.answered
    try:
        await until_reserved(b, bucket_id, "k")
        await asyncio.sleep(LEASE + 0.1)  # A's lease lapses, A still stalled
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"sealed content"
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, FileRecord), a_said
        assert a_said.version_id == record.version_id
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        other.thread.join(30)
        await b.close()


@pytest.mark.parametrize("newer", [False, True])
async def test_a_copy_stalled_before_its_copy_loses_its_staged_object_to_a_settler(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, newer: bool
) -> None:
    """A stalls between staging and its copy onto `k`, past its lease; B settles A's
    write (nothing of A's is at `k`: released) and removes A's staged object: B's write of
    `k` (`newer`) or `heal` does. A wakes and copies from a staged object that is gone: it
    must not answer that its source is missing (a 404 for a source that exists), nor
    replace anything; it is told to retry, and `k` keeps its value."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    source = await sealed_source(b, actor, bucket_id, b"sealed content")
    stalled = leased(config_a, "copy.before_copy=sleep:1.5")
    other = OnItsOwnLoop(
        stalled, lambda a: a.files.copy(actor, source, bucket_id, "k", copied(source))
    )
    answered = other.answered
    try:
        await until_reserved(b, bucket_id, "k")
        await asyncio.sleep(LEASE + 0.1)  # A's lease lapses, A still stalled
        expected = b"old"
        if newer:
            await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"newer"))
            expected = b"newer"
        else:
            await b._commits.heal(time.time() - 3600)
        assert staged_objects(seaweed, source.location) == []
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, WriteSettled | BackendUnavailable), repr(a_said)
        assert (await read_through(b, actor, bucket_id, "k"))[1] == expected
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        other.thread.join(30)
        await b.close()

"""A hostile review of the staged copy on the S3 backend (e183be2): a copy whose ETag is
known only once copied (here an encrypted source's) goes first to
`.bucketd-staging/<token>`, its ETag named in the reservation, then onto the key. Attacked
as a crash (a gateway cut off at each step), as a stalled writer whose lease lapsed while
another gateway settled its write, and as a tenant naming keys like the staged objects."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from storage import encryption
from storage.attributes import Attributes, copied
from storage.backends.s3 import copy as s3_copy
from storage.backends.s3 import names as object_names
from storage.engine import Engine
from storage.errors import FileNotFound, WriteSettled
from storage.models import Actor, FileRecord, WriteOptions
from tests.support.databases import gateway_configs
from tests.support.engine import chunks, read_through
from tests.support.engines import organization_with_bucket
from tests.support.leases import (
    LEASE,
    copy_cut_off,
    leased,
    past_its_lease,
    sealed_source,
    staged_objects,
    stalled_copy,
    two_gateways,
)
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # PostgreSQL and SeaweedFS

SEALED = WriteOptions(encryption=encryption.SSE_S3)
SENT = Attributes("text/markdown", metadata=json.dumps({"colour": "blue"}))


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
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        before = await counted(b, actor, bucket_id)
        whole = await b.files.copy(actor, source, bucket_id, "whole", copied(source))
        after = await counted(b, actor, bucket_id)
        await copy_cut_off(config_a, "copy.after_copy", actor, source, bucket_id)
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
    source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
    other = stalled_copy(config_a, "copy.after_copy", actor, source, bucket_id)
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
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
@pytest.mark.parametrize("point", ["copy.after_staging", "copy.before_copy"])
async def test_a_copy_stalled_before_its_copy_loses_its_staged_object_to_a_settler(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, point: str, newer: bool
) -> None:
    """A stalls after staging (before or after naming the staged ETag in its reservation),
    past its lease. While it stalls, a tenant cannot see or reach its staged object, and a
    key named as it is stored elsewhere. Then B settles A's write (nothing of A's is at
    `k`: released) and removes the staged object: B's write of `k` (`newer`) or `heal`
    does, and leaves the tenant's key. A wakes and copies from a staged object that is
    gone: it must not answer that its source is missing (a 404 for a source that exists),
    nor replace anything; it is told to retry, and `k` keeps its value."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
    other = stalled_copy(config_a, point, actor, source, bucket_id)
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
        [staged] = staged_objects(seaweed, source.location)
        listed = await b.files.list(actor, bucket_id, limit=100)
        assert [record.key for record in listed.items] == ["k", "src"]
        with pytest.raises(FileNotFound):
            await b.files.get(actor, bucket_id, staged)
        named = await b.files.put(actor, bucket_id, staged, SENT, chunks(b"a tenant's"))
        assert object_names.stored_under(named).startswith(object_names.KEYS_PREFIX)
        assert staged_objects(seaweed, source.location) == [staged]
        expected = b"old"
        if newer:
            await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"newer"))
            expected = b"newer"
        else:
            await b._commits.heal(time.time() - 3600)
        assert staged_objects(seaweed, source.location) == []
        assert (await read_through(b, actor, bucket_id, staged))[1] == b"a tenant's"
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, WriteSettled), repr(a_said)
        assert (await read_through(b, actor, bucket_id, "k"))[1] == expected
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        other.thread.join(30)
        await b.close()


async def test_a_sealed_copy_cut_off_in_a_versioned_bucket_is_a_new_version(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """In a versioned bucket a copy's object is its version's own
    (`.bucketd-versions/<id>/k`), not the key's, and unfenced: the settler looks there for
    the staged ETag. Cut off after its copy, the key keeps reading its old version (no
    reader meets a missing object), and `heal` commits the copy as its newest version; the
    old one stays readable."""
    config_a, config_b = gateway_configs(tmp_path, postgres, seaweed)
    b = await Engine.open(config_b)
    try:
        actor, bucket_id = await organization_with_bucket(b, versioning="Enabled")
        old = await b.files.put(actor, bucket_id, "k", SENT, chunks(b"old value"))
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        await copy_cut_off(config_a, "copy.after_copy", actor, source, bucket_id)
        assert (await read_through(b, actor, bucket_id, "k"))[1] == b"old value"
        await asyncio.sleep(LEASE + 0.1)
        await b._commits.heal(time.time() - 3600)
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"sealed content"
        assert object_names.version_of(record.object_key) == record.version_id
        kept = await b.files.get_version(actor, bucket_id, "k", old.version_id)
        stream = await b.files.open(kept, 0, kept.size)
        assert b"".join([chunk async for chunk in stream]) == b"old value"
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


@pytest.mark.parametrize("fault", ["", "copy.after_copy=raise"])
async def test_a_sealed_file_copied_onto_itself_keeps_its_content(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, fault: str
) -> None:
    """A copy of an encrypted `k` onto `k` (a metadata change, or a restore): staged from
    `k`, then copied back over it under an If-Match of its own object. Whole or cut off
    after its copy (then settled by `heal`), `k` reads its content with the new attributes."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await b.files.put(actor, bucket_id, "k", SENT, chunks(b"x"), options=SEALED)
        source = await b.files.get(actor, bucket_id, "k")
        renamed = replace(copied(source), content_type="text/x-new")
        a = await Engine.open(leased(config_a, fault))
        try:
            if fault:
                with pytest.raises(RuntimeError, match="injected fault"):
                    await a.files.copy(actor, source, bucket_id, "k", renamed)
            else:
                await a.files.copy(actor, source, bucket_id, "k", renamed)
        finally:
            await a.close()
        if fault:
            await asyncio.sleep(LEASE + 0.1)
            await b._commits.heal(time.time() - 3600)
        record, content = await read_through(b, actor, bucket_id, "k")
        assert (content, record.content_type) == (b"x", "text/x-new")
        assert record.encryption is not None
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


async def test_a_sealed_copy_past_the_single_copy_limit_cut_off_is_settled(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past S3's single-copy limit (5 GiB; lowered here to 5 MiB, the smallest part S3
    takes) both copies, to the staging name and onto `k`, are multipart copies of the same
    bytes in the same parts: the ETag onto `k` is the staged one's (`-2`), so a copy cut off
    after it is still settled and `k` does not read 404."""
    monkeypatch.setattr(s3_copy, "SINGLE_COPY_LIMIT", 5 * 1024**2)
    monkeypatch.setattr(s3_copy, "COPY_PART", 5 * 1024**2)
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        sent = b"s" * (5 * 1024**2 + 1000)
        source = await sealed_source(b, actor, bucket_id, sent, SENT)
        await copy_cut_off(config_a, "copy.after_copy", actor, source, bucket_id)
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == sent
        assert (record.backend_etag or "").strip('"').endswith("-2")
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


@pytest.mark.parametrize("sealed", [False, True])
async def test_a_copy_released_while_stalled_before_its_copy_leaves_the_key_readable(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, sealed: bool
) -> None:
    """A stalls just before its copy onto `k`, past its lease; `heal` finds nothing of A's
    at `k` and releases A's reservation. A wakes and copies over `k`'s object (its fence
    holds: nothing replaced it), and its commit finds the reservation gone: left so, `k`'s
    record names an object the cluster no longer holds (404 until its next write). As a
    put does (`recommit`), A claims the key again and commits what it copied, or (a staged
    copy, whose staged object the settler removed) never copies and is told to retry."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    if sealed:
        source = await sealed_source(b, actor, bucket_id, b"copied content", SENT)
    else:
        await b.files.put(actor, bucket_id, "src", SENT, chunks(b"copied content"))
        source = await b.files.get(actor, bucket_id, "src")
    other = stalled_copy(config_a, "copy.before_copy", actor, source, bucket_id)
    answered = other.answered
    try:
        await past_its_lease(b, bucket_id)
        await b._commits.heal(time.time() - 3600)
        await other.ended()
        [a_said] = answered
        record, content = await read_through(b, actor, bucket_id, "k")
        if sealed:
            assert isinstance(a_said, WriteSettled), repr(a_said)
            assert content == b"old"
        else:
            assert isinstance(a_said, FileRecord), repr(a_said)
            assert content == b"copied content" and record.version_id == a_said.version_id
            assert (await b.orgs.get(actor.org_id)).stored_bytes == 2 * len(content)
        assert await b.maintenance.check_consistency() == []
    finally:
        other.thread.join(30)
        await b.close()


@pytest.mark.parametrize("fault", ["", "copy.after_copy=raise"])
async def test_a_key_a_staged_copy_wrote_is_written_and_deleted_as_any(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, fault: str
) -> None:
    """The record of a staged copy (committed by its writer, or settled) names the ETag
    CopyObject answered, bare on SeaweedFS, or the HEAD's, quoted: the next write's fence
    (If-Match) and a delete's claim must still take the key."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        a = await Engine.open(leased(config_a, fault))
        try:
            if fault:
                with pytest.raises(RuntimeError, match="injected fault"):
                    await a.files.copy(actor, source, bucket_id, "k", copied(source))
            else:
                await a.files.copy(actor, source, bucket_id, "k", copied(source))
        finally:
            await a.close()
        assert (await read_through(b, actor, bucket_id, "k"))[1] == b"sealed content"
        await b.files.put(actor, bucket_id, "k", SENT, chunks(b"next"))
        assert (await read_through(b, actor, bucket_id, "k"))[1] == b"next"
        await b.files.delete(actor, bucket_id, "k")
        with pytest.raises(FileNotFound):
            await b.files.get(actor, bucket_id, "k")
        assert [key for key in seaweed_keys(seaweed, source.location) if key == "k"] == []
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


def seaweed_keys(seaweed: SeaweedServer, location: str | None) -> list[str]:
    listed = seaweed.client().list_objects_v2(Bucket=location)
    return [item["Key"] for item in listed.get("Contents", [])]

"""Write leases on the S3 backend (storage/backends/s3/settle.py), two engines (gateways) over
one PostgreSQL index and one SeaweedFS: a write whose gateway is gone after its publish
(here a fault raised right after it: the write's lease is no longer renewed) is settled by
the next reader, writer or heal of its key as soon as its lease lapses, with everything its
client sent; a writer whose lease lapsed while it lived answers with what was settled."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from storage.attributes import Attributes, copied
from storage.config import EngineConfig
from storage.engine import Engine
from storage.models import Actor, FileRecord
from tests.support.engine import chunks, read_through
from tests.support.leases import (
    LEASE,
    copy_cut_off,
    leased,
    sealed_source,
    staged_objects,
    stalled_put,
    two_gateways,
    until_read,
)
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # PostgreSQL and SeaweedFS

SENT = Attributes(
    "text/markdown",
    metadata=json.dumps({"colour": "blue"}),
    headers=json.dumps({"Cache-Control": "no-store"}),
    tags=json.dumps({"team": "a"}),
)


async def cut_after_publish(config: EngineConfig, actor: Actor, bucket_id: str) -> None:
    """Overwrite `k` through a gateway whose write dies right after its publish."""
    dying = await Engine.open(leased(config, "put.after_publish=raise"))
    try:
        with pytest.raises(RuntimeError, match="injected fault"):
            await dying.files.put(actor, bucket_id, "k", SENT, chunks(b"cut off"))
    finally:
        await dying.close()


def as_sent(record: FileRecord) -> None:
    assert (record.content_type, record.metadata) == (SENT.content_type, SENT.metadata)
    assert (record.headers, record.tags) == (SENT.headers, SENT.tags)


async def settled_state(b: Engine, actor: Actor, bucket_id: str, content: bytes) -> None:
    """`k` holds `content`, and the counters count it alone."""
    _, read = await read_through(b, actor, bucket_id, "k")
    assert read == content
    assert (await b.orgs.get(actor.org_id)).stored_bytes == len(content)
    bucket = await b.buckets.get(actor, bucket_id)
    assert (bucket.file_count, bucket.size_bytes) == (1, len(content))
    assert await b.maintenance.check_consistency() == []


async def test_the_next_reader_settles_a_write_cut_off_after_its_publish(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """The old record names an object the cut-off write replaced: the read waits out the
    lease and commits the write as its client sent it (before leases: 404 until heal)."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_after_publish(config_a, actor, bucket_id)
        started = time.monotonic()
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"cut off" and time.monotonic() - started < LEASE + 2
        as_sent(record)
        await settled_state(b, actor, bucket_id, b"cut off")
    finally:
        await b.close()


async def test_the_next_writer_settles_a_write_cut_off_after_its_publish(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """It held the key's object: the next write waited 30 s for it, then 409. Now it waits
    out the lease, settles the cut-off write (its version is there for a moment, as a
    version of a write in flight may be) and goes on."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_after_publish(config_a, actor, bucket_id)
        started = time.monotonic()
        await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"next"))
        assert time.monotonic() - started < LEASE + 2
        await settled_state(b, actor, bucket_id, b"next")
    finally:
        await b.close()


async def test_heal_settles_a_lapsed_write_before_the_upload_deadline(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await cut_after_publish(config_a, actor, bucket_id)
        await asyncio.sleep(LEASE)  # the lease lapses
        deadline_passed_by = time.time() - 3600  # what heal was given: only older ones
        await b._commits.heal(deadline_passed_by)
        record = await b.files.get(actor, bucket_id, "k")  # no reread: heal committed it
        as_sent(record)
        await settled_state(b, actor, bucket_id, b"cut off")
    finally:
        await b.close()


async def test_a_writer_whose_lease_lapsed_before_its_commit_answers_with_the_settled_write(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A stalls 1.5 s between publish and commit (its loop blocked: no renewal) with a lease
    of 0.3 s; B's reader takes it for gone and commits A's write. A's own commit then finds
    its reservation settled and answers with that record (the write did happen), instead of
    committing it twice."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    other = stalled_put(config_a, "put.after_publish", actor, bucket_id, b"slow", SENT)
    answered = other.answered
    try:
        await until_read(b, actor, bucket_id, b"slow")  # "old" until A has published
        await other.ended()
        [a_said] = answered
        assert isinstance(a_said, FileRecord), a_said
        record = await b.files.get(actor, bucket_id, "k")
        assert (a_said.backend_etag, a_said.version_id) == (record.backend_etag, record.version_id)
        as_sent(record)
        await settled_state(b, actor, bucket_id, b"slow")
    finally:
        other.thread.join(30)
        await b.close()


async def test_the_next_reader_settles_a_copy_cut_off_after_its_copy(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A server-side copy onto `k` replaces `k`'s object in the cluster before its commit,
    as an overwrite's publish does; its reservation names the ETag the copy will have (a
    single-part source's), so the next reader commits it rather than releasing it."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await b.files.put(actor, bucket_id, "src", SENT, chunks(b"copied"))
        source = await b.files.get(actor, bucket_id, "src")  # with its bucket's location
        await copy_cut_off(config_a, "copy.after_copy", actor, source, bucket_id)
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"copied"
        as_sent(record)
        assert (await b.orgs.get(actor.org_id)).stored_bytes == 2 * len(b"copied")
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


@pytest.mark.parametrize("fault", ["copy.after_copy", "copy.before_copy"])
async def test_a_copy_of_a_sealed_source_cut_off_is_settled_by_the_next_reader(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer, fault: str
) -> None:
    """A copy whose ETag is known only once copied (here an encrypted source's) is staged
    first: copied under a name of its own, whose ETag its reservation then names, then
    copied onto `k`. Cut off after its copy onto `k`, the next reader commits it (the key
    read 404 until its next write before: the old record named an object the cluster no
    longer held); cut off before, `k` keeps its value. Either way the staged object goes."""
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await b.files.put(actor, bucket_id, "k", SENT, chunks(b"old value"))
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        await copy_cut_off(config_a, fault, actor, source, bucket_id)
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == (b"sealed content" if fault == "copy.after_copy" else b"old value")
        as_sent(record)
        assert await b.maintenance.check_consistency() == []
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


async def test_a_copy_cut_off_after_staging_leaves_the_key_and_no_staged_object(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    config_a, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await b.files.put(actor, bucket_id, "k", SENT, chunks(b"old value"))
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        await copy_cut_off(config_a, "copy.after_staging", actor, source, bucket_id)
        _, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"old value"
        assert staged_objects(seaweed, source.location) == []
    finally:
        await b.close()


async def test_a_staged_copy_answers_as_a_copy_and_leaves_no_staged_object(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    _, b, actor, bucket_id = await two_gateways(tmp_path, postgres, seaweed)
    try:
        await b.files.put(actor, bucket_id, "k", SENT, chunks(b"old value"))
        source = await sealed_source(b, actor, bucket_id, b"sealed content", SENT)
        made = await b.files.copy(actor, source, bucket_id, "k", copied(source))
        record, content = await read_through(b, actor, bucket_id, "k")
        assert (content, record.version_id) == (b"sealed content", made.version_id)
        assert staged_objects(seaweed, source.location) == []
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()

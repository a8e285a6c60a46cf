"""Versioned buckets against an in-memory model (Hypothesis state machine), on SQLite and on
PostgreSQL: puts, deletes (markers), deletes of single versions, restores, renames,
suspending, reads of every version, ListObjectVersions paged, listings as of a past moment
(test mode's stale listings), and usage that counts every stored version."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from storage.attributes import Attributes
from storage.backends.s3.names import stored_under
from storage.config import (
    EngineConfig,
    IndexSettings,
    PlanLimits,
    Plans,
    S3Settings,
    StorageSettings,
)
from storage.engine import Engine
from storage.errors import DeleteMarker, FileExists, FileNotFound, QuotaExceeded
from storage.models import Actor
from storage.rules.keyrange import common_prefix
from storage.rules.lifecycle_rules import Rule
from tests.support.engine import chunks
from tests.support.postgres import Postgres
from tests.support.profiles import budget
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

KEYS = st.sampled_from(["a", "a/b", "a/c", "b", "c/d"])
LIFECYCLE = [
    Rule(id="old", noncurrent_days=1, newer_noncurrent_versions=1),
    Rule(id="markers", expired_object_delete_marker=True),
]
"""Keep one noncurrent version per key; remove delete markers left alone."""
CONTENTS = st.sampled_from([b"", b"x", b"same", b"other content"])


@dataclass
class Version:
    version_id: str | None
    """None: the null version."""
    content: bytes | None
    """None: a delete marker."""
    at: int = 0
    """The tick it was made in (the engine's clock moves 10 s a tick)."""


class VersionMachine(RuleBasedStateMachine):
    """One bucket, its versions per key (oldest first) kept beside it in a dict."""

    def __init__(
        self, index: IndexSettings | None = None, storage: StorageSettings | None = None
    ) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp())
        config = EngineConfig(
            data_dir=self.dir,
            storage=storage or StorageSettings(),
            index=index or IndexSettings(),
        )
        self.engine = self.run(Engine.open(config))
        org = self.run(self.engine.orgs.create("model", "pro"))
        self.actor = Actor(org_id=org.id)
        name = f"versions-{uuid.uuid4().hex[:8]}"
        bucket = self.run(self.engine.buckets.create(self.actor, name, "us-east-1"))
        self.bucket_id = bucket.id
        while self.run(self.engine.buckets.get(self.actor, bucket.id)).status != "active":
            self.run(asyncio.sleep(0.001))
        self.run(self.engine.buckets.update(self.actor, self.bucket_id, {"lifecycle": LIFECYCLE}))
        self.versioning: str | None = None
        self.model: dict[str, list[Version]] = {}
        self.ends: list[float] = []
        """When each tick ended, by the engine's clock (10 s before the next began): the
        versions made by then, and no later."""

    def run(self, coroutine):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coroutine)

    def stored_objects(self) -> set[str]:
        """Where the index says each version's content is (on the S3 backend)."""
        page = self.run(self.engine.files.list_versions(self.actor, self.bucket_id, limit=1000))
        return {stored_under(r) for r, _ in page.versions if not r.delete_marker}

    def teardown(self) -> None:
        self.run(self.engine.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def current(self, key: str) -> Version | None:
        versions = self.model.get(key)
        return versions[-1] if versions else None

    def add(self, key: str, version: Version) -> None:
        """A new current version, as S3 makes room for it."""
        versions = self.model.setdefault(key, [])
        if self.versioning is None:
            versions.clear()
        elif self.versioning == "Suspended":
            versions[:] = [v for v in versions if v.version_id is not None]
        versions.append(replace(version, at=len(self.ends)))
        self.ends.append(self.engine.clock.time())  # each change in a tick of its own
        self.engine.clock.advance(10)

    def named(self, key: str, data: st.DataObject) -> Version:
        return data.draw(st.sampled_from(self.model[key]))

    @initialize(state=st.sampled_from([None, "Enabled"]))
    def start(self, state: str | None) -> None:
        """Half the runs start versioned: a history long enough to list as of its past."""
        if state is not None:
            self.set_versioning(state)

    @rule(state=st.sampled_from(["Enabled", "Suspended"]))
    def set_versioning(self, state: str) -> None:
        self.run(self.engine.buckets.set_versioning(self.actor, self.bucket_id, state))
        self.versioning = state

    @rule(key=KEYS, content=CONTENTS)
    def put(self, key: str, content: bytes) -> None:
        record = self.run(
            self.engine.files.put(
                self.actor, self.bucket_id, key, Attributes("text/plain"), chunks(content)
            )
        )
        if self.versioning == "Enabled":
            assert record.version_id is not None
            assert all(v.version_id != record.version_id for v in self.model.get(key, []))
        else:
            assert record.version_id is None
        self.add(key, Version(record.version_id, content))

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        now = self.current(key)
        if now is None or now.content is None:
            with pytest.raises(FileNotFound):
                self.run(self.engine.files.delete(self.actor, self.bucket_id, key))
            return
        record = self.run(self.engine.files.delete(self.actor, self.bucket_id, key))
        if self.versioning is None:
            assert not record.delete_marker
            del self.model[key]
        else:
            assert record.delete_marker
            self.add(key, Version(record.version_id, None))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_version(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        version = self.named(key, data)
        self.run(
            self.engine.files.delete_version(self.actor, self.bucket_id, key, version.version_id)
        )
        self.model[key].remove(version)
        if not self.model[key]:
            del self.model[key]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        version = self.named(key, data)
        call = self.engine.files.restore(self.actor, self.bucket_id, key, version.version_id)
        if version.content is None:
            with pytest.raises(DeleteMarker):
                self.run(call)
            return
        record = self.run(call)
        self.add(key, Version(record.version_id, version.content))

    @rule(key=KEYS, new_key=KEYS)
    def rename(self, key: str, new_key: str) -> None:
        now, there = self.current(key), self.current(new_key)
        call = self.engine.files.update(self.actor, self.bucket_id, key, new_key=new_key)
        if now is None or now.content is None:
            with pytest.raises(FileNotFound):
                self.run(call)
            return
        if new_key != key and there is not None and there.content is not None:
            with pytest.raises(FileExists):
                self.run(call)
            return
        record = self.run(call)
        if new_key == key:
            return
        if self.versioning is None:  # the file moves, its upload time (LastModified) kept
            del self.model[key]
            self.add(new_key, Version(None, now.content))
            self.model[new_key][-1].at = now.at
            return
        self.add(new_key, Version(record.version_id, now.content))
        renamed = self.model[new_key][-1]
        renamed.at, made = now.at, renamed.at  # the moved version keeps its upload time
        assert record.key == new_key
        listed = self.run(
            self.engine.files.list_versions(self.actor, self.bucket_id, key, "", "", "", 1)
        )
        latest, is_latest = listed.versions[0]
        assert latest.key == key and latest.delete_marker and is_latest
        self.add(key, Version(latest.version_id, None))
        self.model[key][-1].at = made  # the marker: the rename's own time

    @rule()
    def lifecycle_pass(self) -> None:
        """A pass of the lifecycle rules a year on: every age is past."""
        self.run(self.engine.lifecycle.run_pass(now=time.time() + 365 * 86_400))
        for key in list(self.model):
            versions = self.model[key]
            versions[:] = versions[-2:]
            if len(versions) == 1 and versions[0].content is None:
                del self.model[key]

    @rule(key=KEYS)
    def read_every_version(self, key: str) -> None:
        now = self.current(key)
        if now is None:
            with pytest.raises(FileNotFound):
                self.run(self.engine.files.get(self.actor, self.bucket_id, key))
        elif now.content is None:
            with pytest.raises(DeleteMarker):
                self.run(self.engine.files.get(self.actor, self.bucket_id, key))
        else:
            record = self.run(self.engine.files.get(self.actor, self.bucket_id, key))
            assert (record.version_id, self.read(record)) == (now.version_id, now.content)
        for version in self.model.get(key, []):
            if version.content is None:
                with pytest.raises(DeleteMarker):
                    self.run(
                        self.engine.files.get_version(
                            self.actor, self.bucket_id, key, version.version_id
                        )
                    )
                continue
            record = self.run(
                self.engine.files.get_version(self.actor, self.bucket_id, key, version.version_id)
            )
            assert self.read(record) == version.content

    def read(self, record) -> bytes:  # type: ignore[no-untyped-def]
        async def read_all() -> bytes:
            stream = await self.engine.files.open(record, 0, record.size)
            return b"".join([chunk async for chunk in stream])

        return bytes(self.run(read_all()))

    @rule(
        prefix=st.sampled_from(["", "a", "a/", "c"]),
        delimiter=st.sampled_from(["", "/"]),
        limit=st.integers(1, 3),
    )
    def list_versions(self, prefix: str, delimiter: str, limit: int) -> None:
        seen: list[tuple[str, str | None, bool]] = []
        prefixes: list[str] = []
        key_marker = version_marker = ""
        while True:
            page = self.run(
                self.engine.files.list_versions(
                    self.actor, self.bucket_id, prefix, delimiter, key_marker, version_marker, limit
                )
            )
            assert len(page.versions) + len(page.prefixes) <= limit
            seen += [(r.key, r.version_id, latest) for r, latest in page.versions]
            prefixes += page.prefixes
            if not page.truncated:
                break
            key_marker, version_marker = page.next_key or "", page.next_version or ""
        expected: list[tuple[str, str | None, bool]] = []
        groups: list[str] = []
        for key in sorted(k for k in self.model if k.startswith(prefix)):
            group = common_prefix(key, prefix, delimiter)
            if group is not None:
                if group not in groups:
                    groups.append(group)
                continue
            versions = self.model[key]
            expected += [
                (key, v.version_id, n == len(versions) - 1)
                for n, v in reversed(list(enumerate(versions)))
            ]
        assert seen == expected
        assert prefixes == groups

    @precondition(lambda self: self.ends)
    @rule(
        data=st.data(),
        prefix=st.sampled_from(["", "a", "a/"]),
        delimiter=st.sampled_from(["", "/"]),
        limit=st.integers(1, 3),
    )
    def list_as_of(self, data: st.DataObject, prefix: str, delimiter: str, limit: int) -> None:
        self.check_as_of(data.draw(st.integers(0, len(self.ends) - 1)), prefix, delimiter, limit)

    def check_as_of(self, tick: int, prefix: str, delimiter: str, limit: int) -> None:
        """Both listings at the end of a past tick show the versions made by then, as
        far as they still exist (storage/index/version_listing.py)."""
        then = {
            key: [v for v in versions if v.at <= tick]
            for key, versions in self.model.items()
            if key.startswith(prefix) and any(v.at <= tick for v in versions)
        }
        files, prefixes, after = [], [], None
        while True:
            page = self.run(
                self.engine.files.list(
                    self.actor, self.bucket_id, prefix, delimiter, after, limit, self.ends[tick]
                )
            )
            files += [(r.key, r.version_id) for r in page.items]
            prefixes += page.prefixes
            if not page.has_more:
                break
            after = page.last
        shown = {k: vs[-1] for k, vs in then.items() if vs[-1].content is not None}
        groups = {common_prefix(k, prefix, delimiter) for k in shown} - {None}
        assert prefixes == sorted(groups)
        assert files == [
            (k, v.version_id)
            for k, v in sorted(shown.items())
            if common_prefix(k, prefix, delimiter) is None
        ]
        seen: list[tuple[str, str | None, bool]] = []
        key_marker = version_marker = ""
        while True:
            listed = self.run(
                self.engine.files.list_versions(
                    *(self.actor, self.bucket_id, prefix, "", key_marker, version_marker, limit),
                    as_of=self.ends[tick],
                )
            )
            seen += [(r.key, r.version_id, latest) for r, latest in listed.versions]
            if not listed.truncated:
                break
            key_marker, version_marker = listed.next_key or "", listed.next_version or ""
        assert seen == [
            (key, v.version_id, n == 0)
            for key in sorted(then)
            for n, v in enumerate(reversed(then[key]))
        ]

    @invariant()
    def lists_as_before_the_last_change(self) -> None:
        if len(self.ends) >= 2:
            self.check_as_of(len(self.ends) - 2, "", "/", 2)

    @invariant()
    def usage_counts_every_stored_version(self) -> None:
        assert self.run(self.engine.maintenance.check_consistency()) == []
        bucket = self.run(self.engine.buckets.get(self.actor, self.bucket_id))
        stored = [v.content for vs in self.model.values() for v in vs if v.content is not None]
        assert (bucket.file_count, bucket.size_bytes) == (len(stored), sum(map(len, stored)))


MODEL = settings(
    max_examples=budget(40),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_versions_on_sqlite() -> None:
    run_state_machine_as_test(VersionMachine, settings=MODEL)


def test_versions_on_postgresql(postgres: Postgres) -> None:
    run_state_machine_as_test(
        lambda: VersionMachine(IndexSettings(url=postgres.new_database())),
        settings=settings(MODEL, max_examples=budget(20)),
    )


def test_versions_on_the_s3_backend(seaweed: SeaweedServer) -> None:
    """The same model with every version's content in a real S3 cluster (SeaweedFS)."""
    storage = StorageSettings(
        backend="s3",
        s3=S3Settings(
            endpoint_url=seaweed.endpoint,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            brand=f"model{uuid.uuid4().hex[:6]}",
        ),
    )
    cluster = seaweed.client()

    class ClusterMachine(VersionMachine):
        def teardown(self) -> None:
            """Every object in the cluster is a version's, and every version has its own
            (checked once per run: listing the cluster each step would double its cost)."""
            try:
                bucket = self.run(self.engine.buckets.get(self.actor, self.bucket_id))
                listed = cluster.list_objects_v2(Bucket=bucket.location).get("Contents", [])
                assert {o["Key"] for o in listed} == self.stored_objects()
            finally:
                super().teardown()

    run_state_machine_as_test(
        lambda: ClusterMachine(storage=storage),
        settings=settings(MODEL, max_examples=budget(20)),
    )


async def _concurrent_versions(index: IndexSettings, data_dir: Path) -> None:
    plans = Plans(free=PlanLimits(max_storage_bytes=10_000))
    engine = await Engine.open(EngineConfig(data_dir=data_dir, index=index, plans=plans))
    try:
        org = await engine.orgs.create("tight", "free")
        actor = Actor(org_id=org.id)
        bucket = await engine.buckets.create(actor, "tight", "us-east-1", versioning="Enabled")
        while (await engine.buckets.get(actor, bucket.id)).status != "active":
            await asyncio.sleep(0.001)

        async def one(n: int) -> bool:
            content = bytes([n]) * 1000  # distinct contents: no shared blob
            try:
                await engine.files.put(
                    actor, bucket.id, "same-key", Attributes("text/plain"), chunks(content)
                )
            except QuotaExceeded:
                return False
            return True

        results = await asyncio.gather(*(one(n) for n in range(25)))
        assert sum(results) == 10
        counted = await engine.buckets.get(actor, bucket.id)
        assert (counted.file_count, counted.size_bytes) == (10, 10_000)
        listed = await engine.files.list_versions(actor, bucket.id, limit=100)
        assert len(listed.versions) == 10
        await engine.files.delete(actor, bucket.id, "same-key")  # a marker frees nothing
        with pytest.raises(QuotaExceeded):
            await engine.files.put(
                actor, bucket.id, "other", Attributes("text/plain"), chunks(b"x")
            )
        oldest = listed.versions[-1][0]
        await engine.files.delete_version(actor, bucket.id, "same-key", oldest.version_id)
        await engine.files.put(
            actor, bucket.id, "other", Attributes("text/plain"), chunks(b"y" * 1000)
        )
        assert await engine.maintenance.check_consistency() == []
        usage = await engine.orgs.get(org.id)
        assert (usage.file_count, usage.stored_bytes) == (10, 10_000)
    finally:
        await engine.close()


def test_the_quota_counts_every_version_under_concurrency_on_sqlite(tmp_path: Path) -> None:
    asyncio.run(_concurrent_versions(IndexSettings(), tmp_path))


def test_the_quota_counts_every_version_under_concurrency_on_postgresql(
    tmp_path: Path, postgres: Postgres
) -> None:
    asyncio.run(_concurrent_versions(IndexSettings(url=postgres.new_database()), tmp_path))

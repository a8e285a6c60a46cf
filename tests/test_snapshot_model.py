"""Snapshots against an in-memory model (Hypothesis state machine): puts, overwrites,
deletes (markers where versioned), deletes of single versions, snapshots, restores, forks,
server snapshots and their restores, deletes of snapshots and of buckets, and garbage
collection, on an unversioned and a versioned bucket, on SQLite and on PostgreSQL. After
every step `bucketd check`'s consistency holds (reference counts count snapshot rows, no
blob file is left or missing) and every bucket's versions and contents read back as the
model has them."""

from __future__ import annotations

import asyncio
import copy
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from storage.attributes import Attributes
from storage.config import EngineConfig, IndexSettings, LifecycleSettings, StorageSettings
from storage.engine import Engine
from storage.errors import FileNotFound, InvalidBucketState
from storage.models import Actor
from tests.support.engine import chunks
from tests.support.postgres import Postgres
from tests.support.profiles import budget

KEYS = st.sampled_from(["a", "b", "c/d"])
CONTENTS = st.sampled_from([b"", b"x", b"same", b"other content"])
MAX_BUCKETS = 4


@dataclass
class Version:
    version_id: str | None
    content: bytes | None
    """None: a delete marker."""


@dataclass
class ModelBucket:
    versioning: str | None
    keys: dict[str, list[Version]] = field(default_factory=dict)
    """Each key's versions, oldest first."""


class SnapshotMachine(RuleBasedStateMachine):
    def __init__(self, index: IndexSettings | None = None) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp())
        config = EngineConfig(
            data_dir=self.dir,
            index=index or IndexSettings(url="sqlite://:memory:"),
            storage=StorageSettings(fsync=False),
            lifecycle=LifecycleSettings(interval_seconds=0),
        )
        self.engine = self.run(Engine.open(config))
        org = self.run(self.engine.orgs.create("model", "pro"))
        self.actor = Actor(org_id=org.id)
        self.buckets: dict[str, ModelBucket] = {}
        self.snapshots: dict[str, tuple[str, ModelBucket]] = {}
        self.servers: dict[str, dict[str, ModelBucket]] = {}
        """Server snapshots: every bucket as it was."""
        self.forks = 0
        for name, versioning in (("plain", None), ("versioned", "Enabled")):
            self.new_bucket(name, versioning)

    def run(self, coroutine):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coroutine)

    def new_bucket(self, name: str, versioning: str | None) -> None:
        bucket = self.run(
            self.engine.buckets.create(
                self.actor, name, "us-east-1", versioning=versioning, at_once=True
            )
        )
        self.buckets[bucket.id] = ModelBucket(versioning)

    def teardown(self) -> None:
        self.run(self.engine.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def pick(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.buckets)))

    @rule(data=st.data(), key=KEYS, content=CONTENTS)
    def put(self, data: st.DataObject, key: str, content: bytes) -> None:
        bucket_id = self.pick(data)
        record = self.run(
            self.engine.files.put(
                self.actor, bucket_id, key, Attributes("text/plain"), chunks(content)
            )
        )
        model = self.buckets[bucket_id]
        versions = model.keys.setdefault(key, [])
        if model.versioning is None:
            versions.clear()
        versions.append(Version(record.version_id, content))

    @rule(data=st.data(), key=KEYS)
    def delete(self, data: st.DataObject, key: str) -> None:
        bucket_id = self.pick(data)
        model = self.buckets[bucket_id]
        versions = model.keys.get(key)
        if not versions or versions[-1].content is None:
            with pytest.raises(FileNotFound):
                self.run(self.engine.files.delete(self.actor, bucket_id, key))
            return
        record = self.run(self.engine.files.delete(self.actor, bucket_id, key))
        if model.versioning is None:
            del model.keys[key]
        else:
            versions.append(Version(record.version_id, None))

    @precondition(lambda self: any(m.keys for m in self.buckets.values()))
    @rule(data=st.data())
    def delete_version(self, data: st.DataObject) -> None:
        bucket_id = data.draw(st.sampled_from(sorted(b for b, m in self.buckets.items() if m.keys)))
        model = self.buckets[bucket_id]
        key = data.draw(st.sampled_from(sorted(model.keys)))
        version = data.draw(st.sampled_from(model.keys[key]))
        self.run(self.engine.files.delete_version(self.actor, bucket_id, key, version.version_id))
        model.keys[key].remove(version)
        if not model.keys[key]:
            del model.keys[key]

    @rule(data=st.data())
    def snapshot(self, data: st.DataObject) -> None:
        bucket_id = self.pick(data)
        made = self.run(self.engine.snapshots.create(self.actor, bucket_id))
        model = self.buckets[bucket_id]
        assert made.file_count == sum(len(v) for v in model.keys.values())
        self.snapshots[made.id] = (bucket_id, copy.deepcopy(model))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        snapshot_id = data.draw(st.sampled_from(sorted(self.snapshots)))
        bucket_id, model = self.snapshots[snapshot_id]
        if bucket_id not in self.buckets:
            with pytest.raises(InvalidBucketState):
                self.run(self.engine.snapshots.restore(self.actor, snapshot_id))
            return
        bucket = self.run(self.engine.snapshots.restore(self.actor, snapshot_id))
        assert bucket.versioning == model.versioning
        self.buckets[bucket_id] = copy.deepcopy(model)

    @precondition(lambda self: self.snapshots and len(self.buckets) < MAX_BUCKETS)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        snapshot_id = data.draw(st.sampled_from(sorted(self.snapshots)))
        self.forks += 1
        bucket = self.run(self.engine.snapshots.fork(self.actor, snapshot_id, f"fork-{self.forks}"))
        self.buckets[bucket.id] = copy.deepcopy(self.snapshots[snapshot_id][1])

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def delete_snapshot(self, data: st.DataObject) -> None:
        snapshot_id = data.draw(st.sampled_from(sorted(self.snapshots)))
        self.run(self.engine.snapshots.delete(self.actor, snapshot_id))
        del self.snapshots[snapshot_id]

    @rule()
    def server_snapshot(self) -> None:
        made = self.run(self.engine.snapshots.create_server())
        assert made.buckets == len(self.buckets)
        self.servers[made.id] = copy.deepcopy(self.buckets)

    @precondition(lambda self: self.servers)
    @rule(data=st.data())
    def restore_server(self, data: st.DataObject) -> None:
        """Buckets made since go, deleted ones come back with their ids, the rest are
        restored; bucket snapshots are untouched."""
        snapshot_id = data.draw(st.sampled_from(sorted(self.servers)))
        self.run(self.engine.snapshots.restore_server(snapshot_id))
        self.buckets = copy.deepcopy(self.servers[snapshot_id])

    @precondition(lambda self: self.servers)
    @rule(data=st.data())
    def delete_server_snapshot(self, data: st.DataObject) -> None:
        snapshot_id = data.draw(st.sampled_from(sorted(self.servers)))
        self.run(self.engine.snapshots.delete_server(snapshot_id))
        del self.servers[snapshot_id]

    @precondition(lambda self: len(self.buckets) > 1)
    @rule(data=st.data())
    def delete_bucket(self, data: st.DataObject) -> None:
        bucket_id = self.pick(data)
        self.run(self.engine.buckets.delete(self.actor, bucket_id, force=True))
        del self.buckets[bucket_id]

    @rule()
    def gc(self) -> None:
        self.run(self.engine.maintenance.collect_garbage())

    @invariant()
    def consistent(self) -> None:
        assert self.run(self.engine.maintenance.check_consistency()) == []

    @invariant()
    def every_bucket_reads_back_as_the_model(self) -> None:
        for bucket_id, model in self.buckets.items():
            page = self.run(self.engine.files.list_versions(self.actor, bucket_id, limit=1000))
            found = [(r.key, r.version_id, r.delete_marker) for r, _ in page.versions]
            expected = [
                (key, v.version_id, v.content is None)
                for key in sorted(model.keys)
                for v in reversed(model.keys[key])
            ]
            assert found == expected
            for (record, _), (key, _, _) in zip(page.versions, expected, strict=True):
                want = next(v.content for v in model.keys[key] if v.version_id == record.version_id)
                if want is not None:
                    assert self.read(record) == want
            stored = [v.content for vs in model.keys.values() for v in vs if v.content is not None]
            bucket = self.run(self.engine.buckets.get(self.actor, bucket_id))
            assert (bucket.file_count, bucket.size_bytes) == (len(stored), sum(map(len, stored)))

    def read(self, record) -> bytes:  # type: ignore[no-untyped-def]
        async def read_all() -> bytes:
            stream = await self.engine.files.open(record, 0, record.size)
            return b"".join([chunk async for chunk in stream])

        return bytes(self.run(read_all()))


MODEL = settings(
    max_examples=budget(20),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_snapshots_against_a_model() -> None:
    run_state_machine_as_test(SnapshotMachine, settings=MODEL)


def test_snapshots_against_a_model_on_postgresql(postgres: Postgres) -> None:
    """The same rules on PostgreSQL (a new database per example): fewer examples, the rules
    themselves are explored above."""
    run_state_machine_as_test(
        lambda: SnapshotMachine(IndexSettings(url=postgres.new_database())),
        settings=settings(MODEL, max_examples=budget(4)),
    )

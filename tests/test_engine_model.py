"""The engine against an in-memory model (Hypothesis state machine), and keyrange units."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
import tempfile
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
from storage.config import EngineConfig, IndexSettings, S3Settings, StorageSettings
from storage.engine import Engine
from storage.errors import FileExists, FileNotFound
from storage.models import Actor
from storage.rules.keyrange import common_prefix, successor
from tests.support.engine import Writes, chunks, copy_index, read_through
from tests.support.model import model_listing
from tests.support.postgres import Postgres
from tests.support.profiles import budget
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

KEYS = st.text(alphabet="ab/é.%", min_size=1, max_size=6)
"""Over the S3 backend many of these are stored under another name
(`storage/backends/s3/names.py`)."""
CONTENTS = st.sampled_from([b"", b"x", b"same", b"other content", b"y" * 3000])


class EngineMachine(RuleBasedStateMachine):
    """One bucket driven by random operations; every answer checked against a dict."""

    def __init__(
        self,
        storage: StorageSettings,
        index: IndexSettings | None = None,
        template: Path | None = None,
    ) -> None:
        """`template`: a migrated SQLite index to start from (the `index_template` fixture)."""
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp())
        copy_index(template, self.dir)
        config = EngineConfig(data_dir=self.dir, storage=storage, index=index or IndexSettings())
        self.engine = self.run(Engine.open(config))
        org = self.run(self.engine.orgs.create("model", "pro"))
        self.actor = Actor(org_id=org.id)
        bucket = self.run(self.engine.buckets.create(self.actor, "model", "us-east-1"))
        self.bucket_id = bucket.id
        while self.run(self.engine.buckets.get(self.actor, bucket.id)).status != "active":
            self.run(asyncio.sleep(0.001))
        self.model: dict[str, bytes] = {}
        self.writes = Writes(self.engine)
        self.on_cluster = storage.backend == "s3"
        self.cut: str | None = None
        """The key whose overwrite died after its publish, until the next step meets it."""
        self.cuts_left = 1
        """Each costs a lapse of the dying gateway's lease: one a run."""

    def run(self, coroutine):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            if sys.exception() is None:  # a run that failed reports its own error
                if self.cut is not None:
                    self.meet_the_cut_off_write("read", b"")
                self.check()  # what finished after the last step (background tasks)
        finally:
            self.run(self.engine.close())
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=KEYS, content=CONTENTS)
    def put(self, key: str, content: bytes) -> None:
        record = self.run(
            self.engine.files.put(
                self.actor, self.bucket_id, key, Attributes("text/plain"), chunks(content)
            )
        )
        assert record.size == len(content)
        assert record.sha256 == hashlib.sha256(content).hexdigest()
        self.model[key] = content

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        if key in self.model:
            self.run(self.engine.files.delete(self.actor, self.bucket_id, key))
            del self.model[key]
        else:
            with pytest.raises(FileNotFound):
                self.run(self.engine.files.delete(self.actor, self.bucket_id, key))

    @precondition(lambda self: self.cut is None)  # a rename copies the record's object
    @rule(key=KEYS, new_key=KEYS)
    def rename(self, key: str, new_key: str) -> None:
        call = self.engine.files.update(self.actor, self.bucket_id, key, new_key=new_key)
        if key not in self.model:
            with pytest.raises(FileNotFound):
                self.run(call)
        elif new_key != key and new_key in self.model:
            with pytest.raises(FileExists):
                self.run(call)
        else:
            self.run(call)
            self.model[new_key] = self.model.pop(key)

    @rule(key=KEYS)
    def read(self, key: str) -> None:
        if key not in self.model:
            with pytest.raises(FileNotFound):
                self.run(self.engine.files.get(self.actor, self.bucket_id, key))
            return
        _, content = self.run(read_through(self.engine, self.actor, self.bucket_id, key))
        assert content == self.model[key]

    @precondition(lambda self: self.on_cluster and self.cuts_left and any(self.model.values()))
    @rule(data=st.data(), content=CONTENTS)
    def overwrite_cut_off_after_publish(self, data: st.DataObject, content: bytes) -> None:
        """An overwrite whose writer dies right after publishing it (a fault raised there:
        its write lease, `CUT_LEASE`, is no longer renewed). The key's value is the new
        content from then on: the cluster holds it, and whoever meets the write next
        settles it once its lease lapses (`storage/backends/s3/settle.py`). Not of an empty
        content: a read of one opens nothing in the cluster, so it reads the old value
        until a writer or heal settles the write (a linearizable answer, but this model's
        register would have to hold both)."""
        key = data.draw(st.sampled_from(sorted(k for k, v in self.model.items() if v)))
        write = self.engine.files.put(
            self.actor, self.bucket_id, key, Attributes("text/plain"), chunks(content)
        )
        self.engine.faults.arm("put.after_publish", "raise")
        try:
            with pytest.raises(RuntimeError, match="injected fault"):
                self.run(write)
        finally:
            self.engine.faults.arm("put.after_publish", None)
        self.model[key] = content
        self.cut, self.cuts_left = key, self.cuts_left - 1

    @precondition(lambda self: self.cut is not None)
    @rule(how=st.sampled_from(["read", "put", "delete"]), content=CONTENTS)
    def meet_the_cut_off_write(self, how: str, content: bytes) -> None:
        """The next reader, writer or deleter of the key the dead write left: a read sees
        the dead write's content, a write or delete goes on after it."""
        key, self.cut = self.cut, None
        assert key is not None
        if how == "read":
            self.read(key)
        elif how == "put":
            self.put(key, content)
        else:
            self.delete(key)

    @rule(
        prefix=st.sampled_from(["", "a", "a/", "b/", "é"]),
        delimiter=st.sampled_from(["", "/", "."]),
        limit=st.integers(1, 4),
    )
    def list_all(self, prefix: str, delimiter: str, limit: int) -> None:
        entries: list[str] = []
        after = None
        while True:
            page = self.run(
                self.engine.files.list(self.actor, self.bucket_id, prefix, delimiter, after, limit)
            )
            assert len(page.items) + len(page.prefixes) <= limit
            entries += sorted([f.key for f in page.items] + page.prefixes)
            if page.last is None:
                assert not page.has_more
                break
            after = page.last
        assert entries == model_listing(self.model, prefix, delimiter)

    @invariant()
    @precondition(lambda self: self.writes.since_check() and self.cut is None)
    def consistent(self) -> None:
        """The whole store, after each step that wrote to the index (`Writes`)."""
        self.check()

    def check(self) -> None:
        assert self.run(self.engine.maintenance.check_consistency()) == []
        bucket = self.run(self.engine.buckets.get(self.actor, self.bucket_id))
        assert bucket.file_count == len(self.model)
        assert bucket.size_bytes == sum(len(v) for v in self.model.values())
        self.writes.checked()


CONTRACT = settings(
    max_examples=budget(30),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ON_A_CLUSTER = settings(CONTRACT, max_examples=budget(15))
CUT_LEASE = 0.3
"""The write lease on a cluster: short, for a write cut off after its publish lapses soon."""
"""The same rules on an S3 cluster: half the budget (each step is a network round trip, and
the rules themselves are explored on local disk); there for what only a cluster does."""


def test_engine_on_local_disk(index_template: Path) -> None:
    storage = StorageSettings(fsync=False)
    run_state_machine_as_test(
        lambda: EngineMachine(storage, template=index_template), settings=CONTRACT
    )


def test_engine_on_local_disk_with_inline_contents(index_template: Path) -> None:
    storage = StorageSettings(fsync=False, inline_max_bytes=16)
    run_state_machine_as_test(
        lambda: EngineMachine(storage, template=index_template), settings=CONTRACT
    )


def test_engine_with_its_index_in_memory() -> None:
    """The in-memory index (`storage/index/memory.py`, the unit level's) keeps the same
    contract as the file it stands in for."""
    storage = StorageSettings(fsync=False)
    memory = IndexSettings(url="sqlite://:memory:")
    run_state_machine_as_test(lambda: EngineMachine(storage, memory), settings=CONTRACT)


def test_engine_with_a_postgresql_index(postgres: Postgres) -> None:
    storage = StorageSettings(fsync=False)
    run_state_machine_as_test(
        lambda: EngineMachine(storage, IndexSettings(url=postgres.migrated_database())),
        settings=CONTRACT,
    )


@pytest.mark.slow
def test_engine_on_s3_with_a_postgresql_index(seaweed: SeaweedServer, postgres: Postgres) -> None:
    s3 = S3Settings(
        endpoint_url=seaweed.endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        brand="pgmodel",
        write_lease_seconds=CUT_LEASE,
    )
    storage = StorageSettings(backend="s3", s3=s3)
    run_state_machine_as_test(
        lambda: EngineMachine(storage, IndexSettings(url=postgres.migrated_database())),
        settings=ON_A_CLUSTER,
    )


@pytest.mark.slow
def test_engine_on_s3(seaweed: SeaweedServer, index_template: Path) -> None:
    s3 = S3Settings(
        endpoint_url=seaweed.endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        brand="model",
        write_lease_seconds=CUT_LEASE,
    )
    storage = StorageSettings(backend="s3", s3=s3)
    run_state_machine_as_test(
        lambda: EngineMachine(storage, template=index_template), settings=ON_A_CLUSTER
    )


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a", "b"),
        ("a/", "a0"),
        ("", None),
        ("\U0010ffff", None),
        ("a\U0010ffff", "b"),
        ("\ud7ff", "\ue000"),
    ],
)
def test_successor(prefix: str, expected: str | None) -> None:
    assert successor(prefix) == expected


def test_common_prefix() -> None:
    assert common_prefix("a/b/c", "", "/") == "a/"
    assert common_prefix("a/b/c", "a/", "/") == "a/b/"
    assert common_prefix("a/b", "a/b", "/") is None
    assert common_prefix("abc", "", "") is None

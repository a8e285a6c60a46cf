"""Driving the engine in process: bodies as async chunks, open blobs, a migrated index to
start from, the index writes a step made, a read as a GET makes it."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from storage.config import EngineConfig, IndexSettings, StorageSettings
from storage.engine import Engine
from storage.errors import FileNotFound
from storage.models import Actor, FileRecord
from tests.support.live import LiveServer


def open_blobs(live: LiveServer) -> list[str]:
    """Blob files the server's processes hold open."""
    assert live.process is not None
    pids = [live.process.pid]
    children = Path(f"/proc/{pids[0]}/task/{pids[0]}/children")
    pids += [int(pid) for pid in children.read_text().split()]
    found = []
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if "/blobs/" in target:
                found.append(target)
    return found


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 1000):
        yield data[i : i + 1000]


class Writes:
    """The index writes of an engine (each transaction it committed; on SQLite, each it
    tried), for a state machine that checks the whole store only after a step that wrote:
    a step that wrote nothing (a read, a listing, a refusal PostgreSQL rolled back) leaves
    the index, and the contents it names, as the last check saw them."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        self._checked: int | None = None
        engine.maintenance.observe_index_writes(self._observe)

    def _observe(self, seconds: float) -> None:
        self.count += 1

    def since_check(self) -> bool:
        return self._checked != self.count

    def checked(self) -> None:
        self._checked = self.count


async def migrated_index(data_dir: Path) -> Path:
    """A SQLite index file that holds bucketd's schema and nothing else, made in `data_dir`
    by an engine's migrations: what the state machines copy into each example's data dir
    (a copy costs 8 ms of CPU less than the migrations)."""
    config = EngineConfig(
        data_dir=data_dir, index=IndexSettings(), storage=StorageSettings(fsync=False)
    )
    engine = await Engine.open(config, collect_garbage=False)
    await engine.close()
    return config.index.sqlite_path(data_dir)


def copy_index(template: Path | None, data_dir: Path) -> None:
    """`template` (from `migrated_index`) as the index of `data_dir`, if there is one."""
    if template is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, IndexSettings().sqlite_path(data_dir))


async def read_through(
    engine: Engine, actor: Actor, bucket_id: str, key: str
) -> tuple[FileRecord, bytes]:
    """The key's record and content, looked up again as a GET does when the content would
    not open (`Files.rereads`)."""
    rereads = engine.files.rereads()
    for _ in rereads.attempts():
        record = await engine.files.get(actor, bucket_id, key)
        try:
            stream = await engine.files.open(record, 0, record.size)
        except FileNotFound:
            if await rereads.raced(record):
                continue
            raise
        return record, b"".join([chunk async for chunk in stream])
    raise rereads.exhausted(key)

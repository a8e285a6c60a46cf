"""Small contents kept in the index (`storage.inline_max_bytes`, on by default): a content is
read from where it was written, whatever the limit in force now, and the operators' tools
(`check`, `check --deep`, `gc`) cover the contents kept there, on real data dirs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from storage.attributes import Attributes
from storage.backends.local.blobs import blob_relpath
from storage.config import EngineConfig, IndexSettings, StorageSettings
from storage.engine import Engine
from storage.index.sqlite import SQLiteDriver
from storage.models import Actor
from tests.support import launch
from tests.support.engine import chunks
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

TEXT = {"Content-Type": "text/plain"}
INLINE = TEST_CONFIG + "[storage]\ninline_max_bytes = 4096\n"
BLOB_FILES = TEST_CONFIG + "[storage]\ninline_max_bytes = 0\n"
SMALL = b"kept in the index, then read with the limit lowered " * 4
OTHER = b"a blob file, read with the limit raised " * 4


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def inline_rows(data_dir: Path) -> dict[str, bytes]:
    """The contents a stopped data dir keeps in its index, by blob id."""
    with closing(sqlite3.connect(f"file:{data_dir / 'index.db'}?mode=ro", uri=True)) as db:
        found = db.execute("SELECT id, inline_data FROM blobs WHERE inline_data IS NOT NULL")
        return {row[0]: bytes(row[1]) for row in found}


def blob_files(data_dir: Path) -> set[str]:
    return {path.name for path in (data_dir / "blobs").rglob("*") if path.is_file()}


def test_a_content_is_read_where_it_was_written_whatever_the_limit_now(tmp_path: Path) -> None:
    data = tmp_path / "data"
    live = LiveServer(data, INLINE).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "moving-limit")["id"]
            assert http.put(
                f"/buckets/{bucket}/files/small", content=SMALL, headers=TEXT
            ).is_success
    finally:
        live.stop()
    assert inline_rows(data) == {sha(SMALL): SMALL} and blob_files(data) == set()

    lowered = LiveServer(data, BLOB_FILES).start()
    try:
        with lowered.client() as http:
            assert http.get(f"/buckets/{bucket}/files/small").content == SMALL
            ranged = http.get(f"/buckets/{bucket}/files/small", headers={"Range": "bytes=5-9"})
            assert ranged.status_code == 206 and ranged.content == SMALL[5:10]
            assert http.put(f"/buckets/{bucket}/files/file", content=OTHER, headers=TEXT).is_success
            # The same content again: its file is written, then reaped (the index has it).
            assert http.put(f"/buckets/{bucket}/files/twin", content=SMALL, headers=TEXT).is_success
            assert http.get(f"/buckets/{bucket}/files/twin").content == SMALL
    finally:
        lowered.stop()
    assert blob_files(data) == {sha(OTHER)} and set(inline_rows(data)) == {sha(SMALL)}
    assert lowered.cli("check").strip() == "consistent"

    raised = LiveServer(data, INLINE).start()
    try:
        with raised.client() as http:
            assert http.get(f"/buckets/{bucket}/files/file").content == OTHER
            ranged = http.get(f"/buckets/{bucket}/files/file", headers={"Range": "bytes=-4"})
            assert ranged.status_code == 206 and ranged.content == OTHER[-4:]
            assert http.get(f"/buckets/{bucket}/files/small").content == SMALL
    finally:
        raised.stop()


def check(data_dir: Path, *flags: str) -> tuple[int, str]:
    """`bucketd check` on a stopped data dir: its exit code and what it printed."""
    result = launch.run(["check", *flags, "--data-dir", str(data_dir)], env=dict(os.environ))
    assert not result.stderr, result.stderr
    return result.returncode, result.stdout


def test_check_gc_and_the_deep_check_cover_contents_in_the_index(tmp_path: Path) -> None:
    contents = {key: f"the content of {key} ".encode() * 8 for key in ("kept", "gone", "rots")}
    contents["short"] = b"loses its last byte " * 8
    live = LiveServer(tmp_path / "data", INLINE).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "inline-tools")["id"]
            for key, content in contents.items():
                assert http.put(
                    f"/buckets/{bucket}/files/{key}", content=content, headers=TEXT
                ).is_success
            assert http.delete(f"/buckets/{bucket}/files/gone").status_code == 200
    finally:
        live.stop()
    data = live.data_dir
    kept = inline_rows(data)
    assert set(kept) == {sha(contents[k]) for k in ("kept", "rots", "short")}  # gone's row went
    assert live.cli("gc").strip() == "removed 0 temp files and 0 unreferenced blobs"
    assert check(data) == (0, "consistent\n")
    assert check(data, "--deep") == (0, "consistent\n")
    assert inline_rows(data) == kept and blob_files(data) == set()

    rotten, short = sha(contents["rots"]), sha(contents["short"])
    flipped = bytearray(contents["rots"])
    flipped[3] ^= 0x01
    with closing(sqlite3.connect(data / "index.db")) as db, db:
        db.execute("UPDATE blobs SET inline_data = ? WHERE id = ?", (bytes(flipped), rotten))
        db.execute("UPDATE blobs SET inline_data = ? WHERE id = ?", (contents["short"][:-1], short))
    code, out = check(data)
    assert code == 1, out
    assert f"blob {rotten}: the content inline does not hash to its id" in out
    assert f"blob {short}: 159 bytes inline, its row says 160" in out
    assert "2 problems" in out and not (data / "blobs" / blob_relpath(rotten)).exists()
    code, out = check(data, "--deep")
    assert code == 1, out
    assert "'rots': corrupt" in out and "'short': corrupt" in out and "'kept'" not in out


def test_a_get_of_a_content_in_the_index_reads_the_file_row_once(tmp_path: Path) -> None:
    """`Files.get` reads the kept content with the file's row, and `Files.open` serves it
    from there: a GET of a small content is one index read of its file, not two. Counted
    from the statements SQLite itself runs on the engine's point-read connection."""

    async def scenario() -> tuple[list[str], bytes, bytes]:
        config = EngineConfig(
            data_dir=tmp_path, index=IndexSettings(), storage=StorageSettings(fsync=False)
        )
        engine = await Engine.open(config, collect_garbage=False)
        try:
            actor = Actor(org_id=(await engine.orgs.create("reads", "pro")).id)
            bucket = await engine.buckets.create(actor, "reads", "us-east-1")
            while (await engine.buckets.get(actor, bucket.id)).status != "active":
                await asyncio.sleep(0.001)
            await engine.files.put(
                actor, bucket.id, "small", Attributes("text/plain"), chunks(SMALL)
            )
            statements: list[str] = []
            driver = engine._index.driver
            assert isinstance(driver, SQLiteDriver)
            driver._direct.set_trace_callback(statements.append)
            record = await engine.files.get(actor, bucket.id, "small")
            whole = b"".join(
                [chunk async for chunk in await engine.files.open(record, 0, record.size)]
            )
            part = b"".join([chunk async for chunk in await engine.files.open(record, 5, 10)])
            driver._direct.set_trace_callback(None)
            return statements, whole, part
        finally:
            await engine.close()

    statements, whole, part = asyncio.run(scenario())
    assert whole == SMALL and part == SMALL[5:10]
    assert [s for s in statements if "FROM files" in s and "FROM blobs" in s] != []
    assert [s for s in statements if "inline_data" in s and "FROM files" not in s] == []

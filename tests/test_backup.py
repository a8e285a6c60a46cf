"""`bucketd backup DEST` under live writes: DEST is a consistent data dir that serves every
file it lists, and a second backup to the same DEST brings it up to date."""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

TEXT = {"Content-Type": "text/plain"}
BLOB_FILES = TEST_CONFIG + "[storage]\ninline_max_bytes = 0\n"
"""For the tests that count and follow blob files: every content is one."""
BIG = b"past the inline limit " * 8000


def restored(dest: Path, tmp_path: Path, name: str) -> LiveServer:
    """A server on a copy of the backup (the backup itself stays as it is)."""
    data = tmp_path / name / "data"
    shutil.copytree(dest, data)  # also makes tmp_path / name
    return LiveServer(data, TEST_CONFIG)


def served_files(live: LiveServer, bucket_id: str) -> dict[str, bytes]:
    contents = {}
    with live.client() as http:
        listed = http.get(f"/buckets/{bucket_id}/files", params={"limit": 100}).json()["data"]
        for item in listed:
            response = http.get(f"/buckets/{bucket_id}/files/{item['key']}")
            assert response.status_code == 200
            assert response.headers["etag"] == item["etag"]
            assert item["etag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
            contents[item["key"]] = response.content
        bucket = http.get(f"/buckets/{bucket_id}").json()["data"]
        assert bucket["sizeBytes"] == sum(len(c) for c in contents.values())
    return contents


def test_backup_while_writing_restores_a_consistent_data_dir(tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    live = LiveServer(tmp_path / "live" / "data", TEST_CONFIG).start()
    access, secret = live.s3_credentials()
    with live.client() as http:
        bucket = new_bucket(http, "backed")
        for i in range(20):
            body = f"stable {i % 5}".encode() * (i + 1)
            http.put(f"/buckets/{bucket['id']}/files/stable/{i}", content=body, headers=TEXT)
        http.put(f"/buckets/{bucket['id']}/files/stable/big", content=BIG, headers=TEXT)
    stop = threading.Event()

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        with live.client() as http:
            while not stop.is_set():
                key = f"busy/{rng.randrange(8)}"
                if rng.random() < 0.75:
                    body = f"{seed} {rng.random()}".encode() * rng.randrange(1, 5000)
                    http.put(f"/buckets/{bucket['id']}/files/{key}", content=body, headers=TEXT)
                else:
                    http.delete(f"/buckets/{bucket['id']}/files/{key}")

    writers = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    for thread in writers:
        thread.start()
    dest = tmp_path / "backup"
    try:
        first = live.cli("backup", str(dest))
        second = live.cli("backup", str(dest))
    finally:
        stop.set()
        for thread in writers:
            thread.join()
        live.stop()
    assert "backed up the index" in first and "already there" in second
    assert not [p for p in dest.rglob("*") if p.name.endswith(".bucketd-backup")]
    with closing(sqlite3.connect(f"file:{dest / 'index.db'}?mode=ro", uri=True)) as db:
        inline = db.execute("SELECT COUNT(*) FROM blobs WHERE inline_data IS NOT NULL")
        assert inline.fetchone()[0] >= 5  # the small contents live in the index, and came along
    assert hashlib.sha256(BIG).hexdigest() in {p.name for p in (dest / "blobs").rglob("*")}

    copy = restored(dest, tmp_path, "restored")
    assert copy.cli("check").strip().endswith("consistent")
    copy.start()
    try:
        contents = served_files(copy, bucket["id"])
        for i in range(20):
            assert contents[f"stable/{i}"] == f"stable {i % 5}".encode() * (i + 1)
        assert contents["stable/big"] == BIG
        s3 = copy.s3(access, secret)  # secrets.key came along: S3 credentials still work
        assert "backed" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        admin = (dest / "admin.key").read_text().strip()
        assert (
            web.get(
                f"{copy.url}/v1/organization", headers={"Authorization": f"Bearer {admin}"}
            ).status_code
            == 200
        )
    finally:
        copy.stop()


def test_a_later_backup_follows_deletes_and_overwrites(tmp_path: Path) -> None:
    (tmp_path / "live" / "data").mkdir(parents=True)
    (tmp_path / "live" / "data" / "README.md").write_text("# data/\n")  # as ./data has it
    live = LiveServer(tmp_path / "live" / "data", BLOB_FILES).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "again")
            for key in ("a", "b", "c"):
                http.put(
                    f"/buckets/{bucket['id']}/files/{key}", content=key.encode() * 100, headers=TEXT
                )
            dest = tmp_path / "backup"
            live.cli("backup", str(dest))
            http.delete(f"/buckets/{bucket['id']}/files/a")
            http.put(f"/buckets/{bucket['id']}/files/b", content=b"new b", headers=TEXT)
            out = live.cli("backup", str(dest))
    finally:
        live.stop()
    assert "and 1 new blobs (1 already there, 2 no longer needed removed)" in out
    assert sorted(path.name for path in dest.iterdir()) == [
        "README.md",
        "admin.key",
        "blobs",
        "index.db",
    ]  # no -wal or -shm beside the copy; a restore (cp -a) brings README.md back
    copy = restored(dest, tmp_path, "restored")
    assert copy.cli("check").strip().endswith("consistent")
    copy.start()
    try:
        assert served_files(copy, bucket["id"]) == {"b": b"new b", "c": b"c" * 100}
    finally:
        copy.stop()


def test_blobs_deleted_during_a_backup_are_set_aside_until_it_ends(tmp_path: Path) -> None:
    from storage.backends.local.reaping import REAPED_DIR, holding_backup_lock

    live = LiveServer(tmp_path / "data", BLOB_FILES).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "aside")
            content = b"kept for the backup " * 100
            digest = hashlib.sha256(content).hexdigest()
            assert http.put(
                f"/buckets/{bucket['id']}/files/k", content=content, headers=TEXT
            ).is_success
            blob = next((live.data_dir / "blobs").rglob(digest))
            with holding_backup_lock(live.data_dir):
                assert http.delete(f"/buckets/{bucket['id']}/files/k").status_code == 200
                assert not blob.exists()
                assert (live.data_dir / REAPED_DIR / digest).read_bytes() == content
            assert not (live.data_dir / REAPED_DIR).exists()
            assert http.put(
                f"/buckets/{bucket['id']}/files/k", content=content, headers=TEXT
            ).is_success
            assert http.delete(f"/buckets/{bucket['id']}/files/k").status_code == 200
            assert not blob.exists() and not (live.data_dir / REAPED_DIR).exists()
    finally:
        live.stop()

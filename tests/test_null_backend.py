"""The null content backend (`storage.backend = "null"`, storage/backends/null.py), through a
real server: the protocol answers as on disk (ETags of what was sent, ranges, multipart,
copies, listings) while no content is kept and reads answer zero bytes; the tools refuse
what they cannot do truthfully; no backend crosses to the other's data dir."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import launch
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

NULL_CONFIG = TEST_CONFIG + '[storage]\nbackend = "null"\n'
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def null_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("null") / "data", NULL_CONFIG).start()
    yield live
    live.stop()


def stored_files(data_dir: Path) -> list[Path]:
    """Every file under the data dir's content folders (blobs, temp files, the parts of
    multipart uploads in flight)."""
    found: list[Path] = []
    for folder in ("blobs", "tmp", "multipart"):
        for root, _dirs, names in os.walk(data_dir / folder):
            found += [Path(root) / name for name in names]
    return found


def test_s3_answers_as_on_disk_but_keeps_no_content(null_server: LiveServer) -> None:
    # The checksums returned are those of what was sent, which the zeros do not match.
    s3 = null_server.s3(response_checksum_validation="when_required")
    s3.create_bucket(Bucket="nothing-kept")
    body = os.urandom(3000)
    put = s3.put_object(Bucket="nothing-kept", Key="a/one", Body=body)
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'

    got = s3.get_object(Bucket="nothing-kept", Key="a/one")
    assert got["ETag"] == put["ETag"]
    assert got["ContentLength"] == 3000
    assert got["Body"].read() == bytes(3000)
    ranged = s3.get_object(Bucket="nothing-kept", Key="a/one", Range="bytes=100-199")
    assert ranged["ContentRange"] == "bytes 100-199/3000"
    assert ranged["Body"].read() == bytes(100)
    head = s3.head_object(Bucket="nothing-kept", Key="a/one")
    assert (head["ContentLength"], head["ETag"]) == (3000, put["ETag"])

    s3.copy_object(Bucket="nothing-kept", Key="a/two", CopySource="nothing-kept/a/one")
    assert s3.head_object(Bucket="nothing-kept", Key="a/two")["ContentLength"] == 3000

    parts = [os.urandom(5 * MIB), os.urandom(1000)]
    upload = s3.create_multipart_upload(Bucket="nothing-kept", Key="big")["UploadId"]
    done = []
    for number, part in enumerate(parts, 1):
        answer = s3.upload_part(
            Bucket="nothing-kept", Key="big", UploadId=upload, PartNumber=number, Body=part
        )
        assert answer["ETag"] == f'"{hashlib.md5(part).hexdigest()}"'
        done.append({"PartNumber": number, "ETag": answer["ETag"]})
    completed = s3.complete_multipart_upload(
        Bucket="nothing-kept", Key="big", UploadId=upload, MultipartUpload={"Parts": done}
    )
    joined = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    assert completed["ETag"] == f'"{joined}-2"'
    tail = s3.get_object(Bucket="nothing-kept", Key="big", Range=f"bytes={5 * MIB - 10}-")
    assert tail["Body"].read() == bytes(1010)
    whole = s3.get_object(Bucket="nothing-kept", Key="big")["Body"].read()
    assert len(whole) == 5 * MIB + 1000 and whole.count(0) == len(whole)

    listed = s3.list_objects_v2(Bucket="nothing-kept")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [
        ("a/one", 3000),
        ("a/two", 3000),
        ("big", 5 * MIB + 1000),
    ]
    assert stored_files(null_server.data_dir) == []


def test_the_api_sees_the_sizes_and_hashes_of_what_was_sent(null_server: LiveServer) -> None:
    body = b"not kept " * 100
    with null_server.client() as http:
        bucket = new_bucket(http, "null-api")
        path = f"/buckets/{bucket['id']}/files/note.txt"
        put = http.put(path, content=body, headers={"Content-Type": "text/plain"})
        assert put.status_code == 201, put.text
        assert put.json()["data"]["etag"] == f'"{hashlib.sha256(body).hexdigest()}"'
        got = http.get(path)
        assert (got.status_code, got.content) == (200, bytes(len(body)))
        assert http.get(path, headers={"Range": "bytes=-5"}).content == bytes(5)
        assert http.get(f"/buckets/{bucket['id']}").json()["data"]["sizeBytes"] == len(body)
    assert "THE NULL STORAGE BACKEND IS ON" in null_server.log_path.read_text()


def _command(live: LiveServer, *args: str, backend: str | None = None) -> tuple[int, str]:
    env = {**os.environ, **live.env}
    if backend is not None:
        env["BUCKETD_STORAGE__BACKEND"] = backend
    argv = [*args, "--data-dir", str(live.data_dir), "--config", str(live.config_path)]
    result = launch.run(argv, env=env)
    return result.returncode, result.stdout + result.stderr


def test_the_tools_check_the_index_and_refuse_the_contents(
    null_server: LiveServer, tmp_path: Path
) -> None:
    """On the stopped null data dir: `check` checks the index alone, `gc` finds nothing, and
    what needs contents (a deep check, backup, export, migrate) refuses, saying why; the
    local backend will not open the data dir, nor the null backend a local one. Last in the
    module: it stops the module's server (the tools need the data dir to themselves)."""
    live = null_server
    live.s3().create_bucket(Bucket="tools")
    live.stop()

    assert _command(live, "check") == (0, "consistent\n")
    status, out = _command(live, "gc")
    assert (status, out) == (0, "removed 0 temp files and 0 unreferenced blobs\n")
    for args in (
        ("check", "--deep"),
        ("backup", str(tmp_path / "backup")),
        ("export", "tools", str(tmp_path / "export")),
        ("migrate", "--to-index", "postgresql://u:p@127.0.0.1:1/db", "--to-s3", "http://x"),
    ):
        status, out = _command(live, *args)
        assert status != 0 and "null storage backend keeps no contents" in out, (args, out)
    assert not (tmp_path / "backup").exists() and not (tmp_path / "export").exists()

    status, out = _command(live, "check", backend="local")
    assert status == 1 and "served by the null storage backend" in out

    (tmp_path / "local-data").mkdir()
    local = LiveServer(tmp_path / "local-data", TEST_CONFIG)
    local.cli("orgs", "create", "someone", "--plan", "free")
    status, out = _command(local, "check", backend="null")
    assert status == 1 and "holds an index made with another storage backend" in out
    assert not (local.data_dir / "NULL-BACKEND").exists()

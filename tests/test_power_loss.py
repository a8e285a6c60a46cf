"""Power cuts on the local backend with SQLite: the data dir lives on a file system that
forgets what was not synced (tests/support/lazyfs.py), bucketd runs with fsync on (the
default), and after each cut, remount and restart:

- every acknowledged write is there and whole (bytes and ETag), deletes stay deleted;
- a write cut before its answer is wholly there or wholly absent, never half there;
- nothing else is listed; `bucketd check --deep` is consistent (counters exact, every
  reference's blob present and re-hashed).

`make test` runs a few cases; HYPOTHESIS_PROFILE=thorough the whole matrix of fault points,
layouts and torn writes (docs/durability.md).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from tests.support import launch
from tests.support.lazyfs import LazyFS
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.profiles import PROFILE

pytestmark = pytest.mark.slow  # two server starts on a FUSE mount per case

THOROUGH = PROFILE == "thorough"
LAYOUTS = {
    "blob-files": "[storage]\ninline_max_bytes = 0\n",
    "inline": "[storage]\ninline_max_bytes = 65536\n",  # OLD and NEW in the index's rows
}
OLD = b"old content " * 1000
NEW = b"NEW content " * 2000
SMALL = b"small and inline"
PART = 5 * 1024 * 1024
Content = bytes | None
"""A key's content after the cut; None: absent."""


@dataclass
class Rig:
    fs: LazyFS
    live: LiveServer
    access: str
    secret: str
    expected: dict[tuple[str, str], set[Content]] = field(default_factory=dict)
    etags: dict[tuple[str, str], str] = field(default_factory=dict)

    def s3(self) -> Any:
        return self.live.s3(self.access, self.secret)

    def acknowledged(self, bucket: str, key: str, body: Content, etag: str = "") -> None:
        self.expected[(bucket, key)] = {body}
        if etag:
            self.etags[(bucket, key)] = etag


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A stopped data dir with S3 credentials, bucket `plain` and versioned bucket `vers`,
    each holding `k` and `gone` at OLD and `src` at NEW; copied onto the disk of each case."""
    base = tmp_path_factory.mktemp("power-template")
    live = LiveServer(base / "data", TEST_CONFIG).start()
    try:
        access, secret = live.s3_credentials()
        s3 = live.s3(access, secret)
        for bucket in ("plain", "vers"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
        for bucket in ("plain", "vers"):
            for key in ("k", "gone"):
                s3.put_object(Bucket=bucket, Key=key, Body=OLD)
            s3.put_object(Bucket=bucket, Key="src", Body=NEW)
    finally:
        live.stop()
    return live.data_dir, access, secret


@pytest.fixture
def rig(tmp_path: Path, template: tuple[Path, str, str], layout: str) -> Iterator[Rig]:
    data, access, secret = template
    shutil.copytree(data, tmp_path / "disk")
    fs = LazyFS(tmp_path / "disk", tmp_path / "mnt").mount()
    live = LiveServer(tmp_path / "mnt", TEST_CONFIG + LAYOUTS[layout], durable=True)
    rig = Rig(fs, live, access, secret)
    for bucket in ("plain", "vers"):
        for key in ("k", "gone"):
            rig.acknowledged(bucket, key, OLD)
        rig.acknowledged(bucket, "src", NEW)
    try:
        yield rig
    finally:
        live.kill()
        fs.unmount()


@pytest.fixture(params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def power_cut(rig: Rig, keep: int | None = None) -> None:
    """Cut (tearing the last unsynced write to `keep` bytes), then the server dies: it can
    write nothing after the cut. Remount the disk as it was left and start bucketd on it."""
    rig.fs.cut(keep)
    rig.live.kill()
    rig.fs.remount()
    rig.live.env = {}
    rig.live.start()


def verify(rig: Rig) -> None:
    """What the cut left against what was acknowledged; then stop, and check --deep."""
    s3 = rig.s3()
    for bucket in ("plain", "vers"):
        listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        expected = {key for (b, key), allowed in rig.expected.items() if b == bucket}
        present = {item["Key"] for item in listed}
        assert present <= expected, f"{bucket}: listed but never written: {present - expected}"
        for key in sorted(expected):
            allowed = rig.expected[(bucket, key)]
            try:
                got = s3.get_object(Bucket=bucket, Key=key)
                content: Content = got["Body"].read()
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "NoSuchKey"
                content, got = None, {}
            assert (key in present) == (content is not None), f"{bucket}/{key}: listing"
            assert content in allowed, f"{bucket}/{key}: {describe(content)} not in " + ", ".join(
                describe(c) for c in allowed
            )
            if (bucket, key) in rig.etags:
                assert got["ETag"] == rig.etags[(bucket, key)], f"{bucket}/{key}: ETag"
    rig.live.stop()
    report = rig.live.cli("check", "--deep")
    assert report.strip().endswith("consistent"), report


def describe(content: Content) -> str:
    if content is None:
        return "absent"
    return f"{len(content)} bytes {hashlib.sha256(content).hexdigest()[:12]}"


def write_everything(rig: Rig) -> None:
    """Every write path, each acknowledged before the next: a blob file or inline content
    (the layout decides), a small inline one, a multipart upload, a copy, a versioned
    overwrite, a delete marker, a plain delete, an SSE-S3 object."""
    s3 = rig.s3()

    def put(bucket: str, key: str, body: bytes, **extra: Any) -> None:
        response = s3.put_object(Bucket=bucket, Key=key, Body=body, **extra)
        rig.acknowledged(bucket, key, body, response["ETag"])

    put("plain", "k", NEW)
    put("plain", "small", SMALL)
    put("vers", "k", NEW)
    put("plain", "sealed", NEW, ServerSideEncryption="AES256")
    body = os.urandom(PART) + b"tail"
    upload = s3.create_multipart_upload(Bucket="plain", Key="multi")["UploadId"]
    parts = []
    for number, piece in enumerate((body[:PART], body[PART:]), start=1):
        etag = s3.upload_part(
            Bucket="plain", Key="multi", UploadId=upload, PartNumber=number, Body=piece
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    done = s3.complete_multipart_upload(
        Bucket="plain", Key="multi", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    rig.acknowledged("plain", "multi", body, done["ETag"])
    copied = s3.copy_object(Bucket="plain", Key="copy", CopySource="plain/k")
    rig.acknowledged("plain", "copy", NEW, copied["CopyObjectResult"]["ETag"])
    s3.delete_object(Bucket="vers", Key="gone")
    rig.acknowledged("vers", "gone", None)
    s3.delete_object(Bucket="plain", Key="gone")
    rig.acknowledged("plain", "gone", None)


@pytest.mark.parametrize("keep", [None, 100] if THOROUGH else [None])
def test_every_acknowledged_write_survives_a_power_cut(rig: Rig, keep: int | None) -> None:
    rig.live.start()
    write_everything(rig)
    power_cut(rig, keep)
    verify(rig)
    rig.live.start()
    versions = rig.s3().list_object_versions(Bucket="vers", Prefix="gone")
    assert [m["IsLatest"] for m in versions.get("DeleteMarkers", [])] == [True]
    assert [v["Size"] for v in versions["Versions"]] == [len(OLD)]


CUT_POINTS = {
    "blob.write": {OLD},  # part of the body is in a temp file (a part's, for "complete")
    "put.after_blob": {OLD},  # the content is stored, the index does not name it
    "put.in_commit": {OLD},  # inside the transaction, before COMMIT
    "copy.in_commit": {OLD},
    "put.after_commit": {NEW},  # committed (and so durable), not yet answered
}
POINTS_OF = {
    "put": ("blob.write", "put.after_blob", "put.in_commit", "put.after_commit"),
    "copy": ("copy.in_commit",),  # a copy shares the source's content: no blob written
    "complete": ("blob.write", "put.after_blob", "put.in_commit", "put.after_commit"),
}
CUT_CASES = [
    (layout, op, point, bucket, keep)
    for layout in LAYOUTS
    for op, points in POINTS_OF.items()
    for point in points
    if not (layout == "inline" and op == "put" and point == "blob.write")  # no file written
    for bucket in ("plain", "vers")
    for keep in (None, 7)
]
QUICK_CUT_CASES = [
    ("blob-files", "put", "put.in_commit", "plain", None),
    ("inline", "complete", "put.after_commit", "vers", 7),
]


def overwrite(s3: Any, op: str, bucket: str) -> None:
    """`bucket/k` becomes NEW by `op`."""
    if op == "put":
        s3.put_object(Bucket=bucket, Key="k", Body=NEW)
    elif op == "copy":
        s3.copy_object(Bucket=bucket, Key="k", CopySource=f"{bucket}/src")
    else:
        upload = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload, PartNumber=1, Body=NEW)
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="k",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )


@pytest.mark.parametrize(
    ("layout", "op", "point", "bucket", "keep"), CUT_CASES if THOROUGH else QUICK_CUT_CASES
)
def test_an_overwrite_cut_before_its_answer_is_old_or_new(
    rig: Rig, op: str, point: str, bucket: str, keep: int | None
) -> None:
    """The server kills itself at the point (it writes nothing after it); the cut then
    drops whatever it had not synced, the last unsynced write torn to `keep` bytes. A
    commit is durable before it is answered: cut after it, the key is NEW."""
    rig.live.env = {"BUCKETD_FAULTS": f"{point}=kill"}
    rig.live.start()
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        overwrite(rig.s3(), op, bucket)
    rig.expected[(bucket, "k")] = CUT_POINTS[point]
    power_cut(rig, keep)
    verify(rig)


@pytest.mark.parametrize(
    ("layout", "bucket"),
    [(layout, bucket) for layout in LAYOUTS for bucket in ("plain", "vers")]
    if THOROUGH
    else [("inline", "vers")],
)
def test_a_delete_cut_before_its_answer_keeps_the_file(rig: Rig, bucket: str) -> None:
    rig.live.env = {"BUCKETD_FAULTS": "delete.in_commit=kill"}
    rig.live.start()
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        rig.s3().delete_object(Bucket=bucket, Key="gone")
    rig.expected[(bucket, "gone")] = {OLD}
    power_cut(rig)
    verify(rig)


@pytest.mark.parametrize(
    ("layout", "killed"),
    [(layout, killed) for layout in LAYOUTS for killed in (False, True)]
    if THOROUGH
    else [("blob-files", False)],
)
def test_a_master_key_rotation_survives_a_power_cut(rig: Rig, killed: bool) -> None:
    """SSE-S3 contents under the data dir's master key; `rotate-master-key` to a configured
    one, acknowledged by its exit; after the cut everything reads under the new key alone.
    `killed`: the rotation dies after its first batch, the power is cut, and everything
    reads with the old key kept as a previous one; a second rotation then finishes."""
    rig.live.start()
    s3 = rig.s3()
    for n in range(3):
        body = os.urandom(20_000 * n + 10)
        response = s3.put_object(
            Bucket="plain", Key=f"enc{n}", Body=body, ServerSideEncryption="AES256"
        )
        rig.acknowledged("plain", f"enc{n}", body, response["ETag"])
    rig.live.stop()
    master = (rig.live.data_dir / "master.key").read_bytes()
    new = base64.b64encode(os.urandom(32)).decode()
    rig.live.env = {
        "BUCKETD_STORAGE__MASTER_KEY": new,
        "BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS": base64.b64encode(master).decode(),
    }
    if killed:
        argv = ["rotate-master-key", "--batch", "1", "--data-dir", str(rig.live.data_dir)]
        argv += ["--config", str(rig.live.config_path)]
        env = {**os.environ, **rig.live.env, "BUCKETD_FAULTS": "rotate.after_batch=kill"}
        assert launch.run(argv, env=env).returncode != 0
        rig.fs.cut()
        rig.fs.remount()
        rig.live.start()
        verify(rig)
    assert "is now readable without previous_master_keys" in rig.live.cli("rotate-master-key")
    rig.fs.cut()
    rig.fs.remount()
    rig.live.env = {"BUCKETD_STORAGE__MASTER_KEY": new}
    rig.live.start()
    verify(rig)


@pytest.mark.parametrize("layout", list(LAYOUTS) if THOROUGH else ["blob-files"])
def test_acknowledged_parts_survive_a_power_cut_and_complete(rig: Rig) -> None:
    """An upload's parts are acknowledged one by one: after a cut, the upload still lists
    them and completes to their bytes."""
    rig.live.start()
    s3 = rig.s3()
    body = os.urandom(PART) + b"the last part"
    upload = s3.create_multipart_upload(Bucket="vers", Key="multi")["UploadId"]
    parts = []
    for number, piece in enumerate((body[:PART], body[PART:]), start=1):
        etag = s3.upload_part(
            Bucket="vers", Key="multi", UploadId=upload, PartNumber=number, Body=piece
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    power_cut(rig)
    s3 = rig.s3()
    listed = s3.list_parts(Bucket="vers", Key="multi", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"]) for p in listed] == [
        (p["PartNumber"], p["ETag"]) for p in parts
    ]
    done = s3.complete_multipart_upload(
        Bucket="vers", Key="multi", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    rig.acknowledged("vers", "multi", body, done["ETag"])
    verify(rig)


def test_the_first_start_s_writes_survive_a_power_cut(tmp_path: Path) -> None:
    """A first start makes the data dir's folders and the admin key, printed once and saved
    to admin.key (a data dir that lost the file gets no new one): after a cut right after
    the first acknowledged writes, the key, a blob file and a part are all there."""
    with LazyFS(tmp_path / "disk", tmp_path / "mnt") as fs:
        config = TEST_CONFIG + LAYOUTS["blob-files"]
        live = LiveServer(tmp_path / "mnt", config, durable=True).start()
        key = live.admin_key
        rig = Rig(fs, live, *live.s3_credentials())
        s3 = rig.s3()
        for bucket in ("plain", "vers"):
            s3.create_bucket(Bucket=bucket)
        rig.acknowledged(
            "plain", "k", OLD, s3.put_object(Bucket="plain", Key="k", Body=OLD)["ETag"]
        )
        upload = s3.create_multipart_upload(Bucket="vers", Key="multi")["UploadId"]
        part = s3.upload_part(Bucket="vers", Key="multi", UploadId=upload, PartNumber=1, Body=OLD)
        try:
            power_cut(rig)
            assert live.admin_key == key
            with live.client() as http:
                assert http.get("/organization").status_code == 200
            listed = rig.s3().list_parts(Bucket="vers", Key="multi", UploadId=upload)["Parts"]
            assert [p["ETag"] for p in listed] == [part["ETag"]]
            rig.s3().abort_multipart_upload(Bucket="vers", Key="multi", UploadId=upload)
            verify(rig)
        finally:
            live.kill()


@pytest.mark.parametrize("layout", list(LAYOUTS) if THOROUGH else ["inline"])
def test_a_snapshot_and_its_restore_survive_a_power_cut(rig: Rig) -> None:
    """A snapshot of `vers`, writes after it, the restore (each acknowledged), then a cut:
    the snapshot is still there and the bucket is as the snapshot holds it."""
    rig.live.start()
    s3 = rig.s3()
    with rig.live.client() as http:
        buckets = http.get("/buckets").json()["data"]
        bucket_id = next(b["id"] for b in buckets if b["name"] == "vers")
        taken = http.post(f"/buckets/{bucket_id}/snapshots", json={"name": "before"})
        assert taken.status_code == 201, taken.text
        snapshot = taken.json()["data"]["id"]
        s3.put_object(Bucket="vers", Key="k", Body=NEW)
        s3.put_object(Bucket="vers", Key="later", Body=NEW)
        s3.delete_object(Bucket="vers", Key="gone")
        restored = http.post(f"/snapshots/{snapshot}/restore")
        assert restored.status_code == 200, restored.text
    power_cut(rig)
    with rig.live.client() as http:
        assert http.get(f"/snapshots/{snapshot}").status_code == 200
    versions = rig.s3().list_object_versions(Bucket="vers")
    assert versions.get("DeleteMarkers", []) == []
    assert sorted(v["Key"] for v in versions["Versions"]) == ["gone", "k", "src"]
    verify(rig)


@pytest.mark.parametrize("layout", list(LAYOUTS) if THOROUGH else ["blob-files"])
def test_a_lifecycle_expiry_survives_a_power_cut(rig: Rig) -> None:
    """With a half-second lifecycle day, `tmp/` keys expire after a day; once the expiry is
    seen (the key reads 404), a cut does not bring them back."""
    with rig.live.config_path.open("a") as config:
        config.write("\n[lifecycle]\nday_seconds = 0.5\ninterval_seconds = 0.25\n")
    rig.live.start()
    s3 = rig.s3()
    rule = {"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled"}
    s3.put_bucket_lifecycle_configuration(
        Bucket="plain", LifecycleConfiguration={"Rules": [{**rule, "Expiration": {"Days": 1}}]}
    )
    for n in range(3):
        s3.put_object(Bucket="plain", Key=f"tmp/{n}", Body=OLD + bytes([n]))
        rig.acknowledged("plain", f"tmp/{n}", None)
    deadline = time.monotonic() + 20
    while s3.list_objects_v2(Bucket="plain", Prefix="tmp/").get("KeyCount", 0):
        assert time.monotonic() < deadline, "the lifecycle worker did not expire tmp/"
        time.sleep(0.1)
    power_cut(rig)
    verify(rig)


@pytest.mark.parametrize("kind", ["sealing", "master"])
def test_the_data_dir_s_keys_survive_a_cut_right_after_they_are_made(
    tmp_path: Path, kind: str
) -> None:
    """secrets.key seals the S3 secrets, master.key wraps SSE-S3 contents' keys: a key made
    anew after a cut would leave everything sealed under the old one unreadable."""
    from storage.encryption import MasterKeys
    from storage.sealing import Sealer

    def key(data_dir: Path) -> bytes:
        if kind == "sealing":
            return Sealer.for_data_dir(data_dir).derive("test", b"")
        return MasterKeys.for_data_dir(data_dir).current_id.encode()

    with LazyFS(tmp_path / "disk", tmp_path / "mnt") as fs:
        made = key(fs.mountpoint)
        fs.cut()
        fs.remount()
        assert key(fs.mountpoint) == made

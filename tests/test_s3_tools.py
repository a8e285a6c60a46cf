"""The aws CLI and rclone against bucketd's S3 endpoint, as a developer would use them."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.commands import aws, rclone
from tests.support.live import TEST_CONFIG, LiveServer

pytestmark = pytest.mark.slow  # the aws CLI and rclone


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("tools") / "data", TEST_CONFIG).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credentials(live: LiveServer) -> tuple[str, str]:
    return live.s3_credentials()


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def make_tree(root: Path) -> None:
    """Files written ten seconds ago. `aws s3 sync` uploads a file modified later than its
    object's LastModified, which S3 gives in whole seconds: a file written in the second
    its first sync uploads it would be uploaded again by the next one."""
    files = {
        "readme.txt": b"hello",
        "docs/guide.md": b"# guide\n" * 100,
        "docs/deep/nested/file with spaces.txt": b"spaces",
        "data/big.bin": os.urandom(9 * 1024 * 1024),
        "unicode/ünïcødé.txt": "ünïcødé".encode(),
        "empty.txt": b"",
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.utime(path, (time.time() - 10, time.time() - 10))


def test_aws_cli_cp_sync_rm_and_s3api(
    live: LiveServer, credentials: tuple[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "source"
    make_tree(source)
    assert aws(live, credentials, "s3", "mb", "s3://cli-bucket").returncode == 0
    copied = aws(
        live,
        credentials,
        "s3",
        "cp",
        str(source / "data" / "big.bin"),
        "s3://cli-bucket/single/big.bin",
    )
    assert copied.returncode == 0, copied.stderr
    first = aws(live, credentials, "s3", "sync", str(source), "s3://cli-bucket/tree")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("upload:") == 6
    second = aws(live, credentials, "s3", "sync", str(source), "s3://cli-bucket/tree")
    assert second.returncode == 0 and "upload:" not in second.stdout  # nothing copied again
    back = tmp_path / "back"
    down = aws(live, credentials, "s3", "cp", "--recursive", "s3://cli-bucket/tree", str(back))
    assert down.returncode == 0, down.stderr
    assert tree(back) == tree(source)
    listed = aws(
        live,
        credentials,
        "s3api",
        "list-objects-v2",
        "--bucket",
        "cli-bucket",
        "--prefix",
        "tree/docs/",
    )
    assert listed.returncode == 0
    assert {item["Key"] for item in json.loads(listed.stdout)["Contents"]} == {
        "tree/docs/guide.md",
        "tree/docs/deep/nested/file with spaces.txt",
    }
    head = aws(
        live,
        credentials,
        "s3api",
        "head-object",
        "--bucket",
        "cli-bucket",
        "--key",
        "tree/readme.txt",
    )
    assert json.loads(head.stdout)["ContentLength"] == 5
    removed = aws(live, credentials, "s3", "rm", "--recursive", "s3://cli-bucket/tree")
    assert removed.returncode == 0 and removed.stdout.count("delete:") == 6
    left = json.loads(
        aws(live, credentials, "s3api", "list-objects-v2", "--bucket", "cli-bucket").stdout
    )
    assert [item["Key"] for item in left["Contents"]] == ["single/big.bin"]
    assert aws(live, credentials, "s3", "rb", "s3://cli-bucket", "--force").returncode == 0


def test_rclone_copy_and_check(
    live: LiveServer, credentials: tuple[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "source"
    make_tree(source)
    assert rclone(live, credentials, "mkdir", "bkd:rclone-bucket").returncode == 0
    copied = rclone(
        live,
        credentials,
        "copy",
        str(source),
        "bkd:rclone-bucket/tree",
        "--s3-chunk-size",
        "5M",
        "--s3-upload-cutoff",
        "5M",
    )
    assert copied.returncode == 0, copied.stderr
    checked = rclone(live, credentials, "check", str(source), "bkd:rclone-bucket/tree")
    assert checked.returncode == 0, checked.stderr
    assert "0 differences found" in checked.stderr
    (source / "readme.txt").write_bytes(b"changed")
    differs = rclone(live, credentials, "check", str(source), "bkd:rclone-bucket/tree")
    assert differs.returncode != 0 and "1 differences found" in differs.stderr
    back = tmp_path / "back"
    assert rclone(live, credentials, "copy", "bkd:rclone-bucket/tree", str(back)).returncode == 0
    assert tree(back)["data/big.bin"] == (source / "data" / "big.bin").read_bytes()


def test_aws_cli_versions(live: LiveServer, credentials: tuple[str, str], tmp_path: Path) -> None:
    def api(*args: str) -> dict[str, object]:
        done = aws(live, credentials, "s3api", *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    api("create-bucket", "--bucket", "history")
    api(
        "put-bucket-versioning",
        "--bucket", "history",
        "--versioning-configuration", "Status=Enabled",
    )  # fmt: skip
    (tmp_path / "one").write_bytes(b"first")
    (tmp_path / "two").write_bytes(b"second")
    first = api("put-object", "--bucket", "history", "--key", "k", "--body", str(tmp_path / "one"))
    api("put-object", "--bucket", "history", "--key", "k", "--body", str(tmp_path / "two"))
    marker = api("delete-object", "--bucket", "history", "--key", "k")
    assert marker["DeleteMarker"] is True
    listed = api("list-object-versions", "--bucket", "history")
    assert [v["IsLatest"] for v in listed["Versions"]] == [False, False]  # type: ignore[index]
    assert listed["DeleteMarkers"][0]["VersionId"] == marker["VersionId"]  # type: ignore[index]
    out = tmp_path / "out"
    got = api(
        "get-object",
        "--bucket", "history", "--key", "k",
        "--version-id", str(first["VersionId"]),
        str(out),
    )  # fmt: skip
    assert got["VersionId"] == first["VersionId"] and out.read_bytes() == b"first"
    versions = aws(live, credentials, "s3", "ls", "s3://history/")
    assert versions.returncode == 0 and versions.stdout.strip() == ""  # the marker hides it


def test_aws_cli_object_lock_and_lifecycle(
    live: LiveServer, credentials: tuple[str, str], tmp_path: Path
) -> None:
    def api(*args: str, ok: bool = True) -> dict[str, object]:
        done = aws(live, credentials, "s3api", *args)
        assert (done.returncode == 0) == ok, done.stderr
        return json.loads(done.stdout) if ok and done.stdout.strip() else {"stderr": done.stderr}

    api("create-bucket", "--bucket", "vault", "--object-lock-enabled-for-bucket")
    api(
        "put-object-lock-configuration",
        "--bucket", "vault",
        "--object-lock-configuration",
        '{"ObjectLockEnabled": "Enabled", '
        '"Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}}',
    )  # fmt: skip
    (tmp_path / "doc").write_bytes(b"kept")
    put = api("put-object", "--bucket", "vault", "--key", "doc", "--body", str(tmp_path / "doc"))
    version = str(put["VersionId"])
    retention = api("get-object-retention", "--bucket", "vault", "--key", "doc")
    assert retention["Retention"]["Mode"] == "GOVERNANCE"  # type: ignore[index]
    api(
        "put-object-legal-hold",
        "--bucket", "vault", "--key", "doc", "--legal-hold", "Status=ON",
    )  # fmt: skip
    hold = api("get-object-legal-hold", "--bucket", "vault", "--key", "doc")
    assert hold["LegalHold"] == {"Status": "ON"}
    refused = api(
        "delete-object", "--bucket", "vault", "--key", "doc", "--version-id", version, ok=False
    )
    assert "AccessDenied" in str(refused["stderr"])

    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {
                "Rules": [
                    {
                        "ID": "tmp",
                        "Filter": {"Prefix": "tmp/"},
                        "Status": "Enabled",
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                    }
                ]
            }
        )
    )
    api(
        "put-bucket-lifecycle-configuration",
        "--bucket", "vault", "--lifecycle-configuration", f"file://{rules}",
    )  # fmt: skip
    got = api("get-bucket-lifecycle-configuration", "--bucket", "vault")
    assert got["Rules"][0]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}  # type: ignore[index]

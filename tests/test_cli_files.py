"""The file commands a person types: `bucketd buckets|files|export|import`, run as real
subprocesses against a live server (and, for export and import, on a stopped data dir)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import bucketd_client as bc
from tests.support.commands import bucketd, ok
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.names import unique_name

pytestmark = pytest.mark.slow  # a bucketd process per command

MANIFEST = ".bucketd-manifest.json"


KMS_ENV = {
    "BUCKETD_STORAGE__KMS_KEYS": json.dumps([f"alpha={base64.b64encode(os.urandom(32)).decode()}"])
}
"""A keyring of one key, for `bucketd buckets encryption NAME aws:kms/alpha`."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("cli") / "data"
    server = LiveServer(data, TEST_CONFIG, env=KMS_ENV).start()
    yield server
    server.stop()


def tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file() and path.name != MANIFEST
    }


@pytest.fixture
def bucket(live: LiveServer) -> str:
    name = unique_name()
    out = json.loads(ok(bucketd(live, "buckets", "create", name, "--json")))
    assert out["status"] == "active" and out["name"] == name
    return name


def test_buckets_create_list_delete(live: LiveServer) -> None:
    name = unique_name()
    assert name in ok(bucketd(live, "buckets", "create", name, "--region", "eu-west-1"))
    listed = ok(bucketd(live, "buckets", "list"))
    assert listed.splitlines()[0].split() == ["ID", "NAME", "REGION", "STATUS", "VERSIONS", "SIZE"]
    assert any(name in line and "eu-west-1" in line for line in listed.splitlines())
    as_json = json.loads(ok(bucketd(live, "buckets", "list", "--json")))
    assert name in [b["name"] for b in as_json]
    ok(bucketd(live, "buckets", "delete", name))
    again = bucketd(live, "buckets", "delete", name)
    assert again.returncode == 1 and "bucket" in again.stderr


def test_flags_and_usage_errors(live: LiveServer) -> None:
    flagged = bucketd(None, "buckets", "list", "--url", live.url, "--key", live.admin_key)
    assert flagged.returncode == 0
    missing = bucketd(None, "buckets", "list", "--url", live.url)
    assert missing.returncode == 2 and "BUCKETD_KEY" in missing.stderr
    wrong = bucketd(live, "buckets", "list", "--key", "svc_" + "x" * 43)
    assert wrong.returncode == 1 and "401" in wrong.stderr
    unreachable = bucketd(None, "buckets", "list", "--url", "http://127.0.0.1:9", "--key", "svc_x")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
    assert bucketd(live, "files", "put", "nope", "/does/not/exist").returncode == 2
    assert bucketd(live, "files").returncode == 2


def test_the_cli_manners(live: LiveServer, tmp_path: Path) -> None:
    """Standard input and output as `-`, sizes with units and `-h`, the API's names in
    --json, files made as the umask says, messages that name the CLI's flags."""
    name = unique_name()
    created = json.loads(
        ok(bucketd(live, "buckets", "create", name, "--max-upload-bytes", "2KiB", "--json"))
    )
    assert created["maxUploadBytes"] == 2048 and "max_upload_bytes" not in created
    ok(bucketd(live, "files", "put", name, "-", "notes/today.log", stdin="x" * 1500))
    too_big = bucketd(live, "files", "put", name, "-", "big.log", stdin="x" * 2049)
    assert too_big.returncode == 1 and "413" in too_big.stderr
    streamed = bucketd(live, "files", "get", name, "notes/today.log", "-")
    assert streamed.stdout == "x" * 1500 and "downloaded 1 file" in streamed.stderr
    listed = ok(bucketd(live, "files", "ls", name, "notes/", "-h"))
    assert "1.5 KiB" in listed and "1500" not in listed
    previous = os.umask(0o027)
    try:
        ok(bucketd(live, "files", "get", name, "notes/today.log", str(tmp_path / "today.log")))
    finally:
        os.umask(previous)
    assert (tmp_path / "today.log").stat().st_mode & 0o777 == 0o640
    refused = bucketd(live, "buckets", "delete", name)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert "force=true" not in refused.stderr


def test_put_ls_get_rm(live: LiveServer, bucket: str, tmp_path: Path) -> None:
    source = tmp_path / "photos"
    (source / "2024").mkdir(parents=True)
    (source / "2024" / "cat.jpg").write_bytes(b"\xff\xd8 cat")
    (source / "notes.txt").write_text("notes")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024))
    put = bucketd(live, "files", "put", bucket, str(source), str(big), "--progress")
    assert put.returncode == 0, put.stderr
    assert "uploaded 3 files" in put.stdout and "MB/s" in put.stdout
    assert "100%" in put.stderr  # the bar was drawn for the 3 MiB file

    top = ok(bucketd(live, "files", "ls", bucket))
    assert "PRE" in top and "photos/" in top and "big.bin" in top
    nested = json.loads(ok(bucketd(live, "files", "ls", bucket, "photos/", "-r", "--json")))
    assert {f["key"]: f["contentType"] for f in nested["files"]} == {
        "photos/2024/cat.jpg": "image/jpeg",
        "photos/notes.txt": "text/plain",
    }

    out = tmp_path / "out"
    got = bucketd(live, "files", "get", bucket, "photos/", str(out), "-r")
    assert got.returncode == 0 and "downloaded 2 files" in got.stdout
    assert tree(out) == {"2024/cat.jpg": b"\xff\xd8 cat", "notes.txt": b"notes"}
    single = tmp_path / "single.bin"
    ok(bucketd(live, "files", "get", bucket, "big.bin", str(single)))
    assert single.read_bytes() == big.read_bytes()
    missing = bucketd(live, "files", "get", bucket, "nope", str(tmp_path / "x"))
    assert missing.returncode == 1 and not (tmp_path / "x").exists()

    removed = json.loads(ok(bucketd(live, "files", "rm", bucket, "photos/", "-r", "--json")))
    assert sorted(removed["deleted"]) == ["photos/2024/cat.jpg", "photos/notes.txt"]
    assert "photos/" not in ok(bucketd(live, "files", "ls", bucket))
    gone = bucketd(live, "files", "rm", bucket, "photos/notes.txt")
    assert gone.returncode == 1


def test_versions_commands(live: LiveServer, tmp_path: Path) -> None:
    name = unique_name()
    ok(bucketd(live, "buckets", "create", name, "--versioning", "enabled"))
    doc = tmp_path / "doc.txt"
    for text in ("first", "second"):
        doc.write_text(text)
        ok(bucketd(live, "files", "put", name, str(doc)))
    ok(bucketd(live, "files", "rm", name, "doc.txt"))
    listed = json.loads(ok(bucketd(live, "files", "versions", name, "doc.txt", "--json")))
    assert [v["deleteMarker"] for v in listed] == [True, False, False]
    first = listed[2]["versionId"]
    table = ok(bucketd(live, "files", "versions", name, "--prefix", "doc"))
    assert "marker" in table and first in table
    out = tmp_path / "old.txt"
    ok(bucketd(live, "files", "get", name, "doc.txt", str(out), "--version-id", first))
    assert out.read_text() == "first"
    assert "restored doc.txt" in ok(bucketd(live, "files", "restore", name, "doc.txt", first))
    current = tmp_path / "now.txt"
    ok(bucketd(live, "files", "get", name, "doc.txt", str(current)))
    assert current.read_text() == "first"
    ok(bucketd(live, "files", "rm", name, "doc.txt", "--version-id", listed[1]["versionId"]))
    assert len(json.loads(ok(bucketd(live, "files", "versions", name, "doc.txt", "--json")))) == 3
    assert bucketd(live, "files", "rm", name, "a", "b", "--version-id", first).returncode == 2
    assert "suspended" in ok(bucketd(live, "buckets", "versioning", name, "suspended"))


def test_export_is_plain_files_resumable_and_lists_unwritable_keys(
    live: LiveServer, bucket: str, tmp_path: Path
) -> None:
    with bc.Client(live.url, live.admin_key) as client:
        bucket_id = next(b.id for b in client.iter_buckets() if b.name == bucket)
        contents = {f"docs/{i}.txt": f"doc {i}".encode() for i in range(5)}
        contents["img/a.png"] = b"png"
        for key, body in contents.items():
            client.upload(bucket_id, key, body)
        awkward = ["../escape", "a//b", "dir/", "x" * 300, "docs/0.txt/child"]
        for key in awkward:
            client.upload(bucket_id, key, b"awkward")
    target = tmp_path / "export"
    first = json.loads(ok(bucketd(live, "export", bucket, str(target), "--json")))
    assert first["copied"] == len(contents) and first["unwritable"] == len(awkward)
    assert tree(target) == contents
    assert not (target / MANIFEST).exists()  # beside the folder: `rclone copy` would upload it
    manifest = json.loads(target.with_name(target.name + MANIFEST).read_text())
    assert sorted(u["key"] for u in manifest["unwritable"]) == sorted(awkward)
    assert manifest["files"]["img/a.png"]["contentType"] == "image/png"
    assert not (tmp_path.parent / "escape").exists()

    (target / "docs" / "3.txt").unlink()  # as if the first run had stopped before it
    second = json.loads(ok(bucketd(live, "export", bucket, str(target), "--json")))
    assert second["copied"] == 1 and second["skipped"] == len(contents) - 1
    assert tree(target) == contents
    beside = target.with_name(target.name + MANIFEST)
    beside.rename(target / MANIFEST)  # where an earlier bucketd kept it: read, then moved
    third = json.loads(ok(bucketd(live, "export", bucket, str(target), "--json")))
    assert third["copied"] == 0 and third["skipped"] == len(contents)
    assert beside.exists() and not (target / MANIFEST).exists()

    copy = unique_name()
    ok(bucketd(live, "buckets", "create", copy))
    imported = json.loads(ok(bucketd(live, "import", str(target), copy, "--json")))
    assert imported["copied"] == len(contents)
    again = json.loads(ok(bucketd(live, "import", str(target), copy, "--json")))
    assert again["copied"] == 0 and again["skipped"] == len(contents)
    with bc.Client(live.url, live.admin_key) as client:
        copy_id = next(b.id for b in client.iter_buckets() if b.name == copy)
        files = {f.key: f for f in client.iter_files(copy_id)}
        assert {key: client.read(copy_id, key) for key in files} == contents
        assert files["img/a.png"].content_type == "image/png"


def test_a_manifest_that_does_not_read_stops_the_command_in_one_line(
    live: LiveServer, bucket: str, tmp_path: Path
) -> None:
    """A damaged manifest (beside the folder, or inside it where an earlier bucketd kept
    it) is neither a traceback nor overwritten: the command says which file, and stops."""
    target = tmp_path / "export"
    beside = target.with_name(target.name + MANIFEST)
    for damaged, where in [(b'{"files": {"a": {"etag', beside), (b"[1, 2]", target / MANIFEST)]:
        where.parent.mkdir(exist_ok=True)
        where.write_bytes(damaged)
        for command in (("export", bucket, str(target)), ("import", str(target), bucket)):
            refused = bucketd(live, *command)
            assert refused.returncode == 2, refused.stderr
            assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
            assert f"{where} is not an export manifest bucketd can read" in refused.stderr
            assert where.read_bytes() == damaged
        where.unlink()
    assert list(target.iterdir()) == []  # the folder an export would have filled


def test_export_and_import_on_a_stopped_data_dir(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", TEST_CONFIG).start()
    with bc.Client(live.url, live.admin_key) as client:
        source = client.wait_until_active(client.create_bucket("source", "us-east-1"))
        empty = client.wait_until_active(client.create_bucket("empty", "us-east-1"))
        for i in range(3):
            client.upload(source.id, f"f/{i}.txt", f"file {i}".encode())
    offline = ["--data-dir", str(live.data_dir), "--config", str(live.config_path)]
    busy = bucketd(None, "export", source.id, str(tmp_path / "x"), *offline)
    assert busy.returncode == 1 and "another bucketd process" in busy.stderr
    live.stop()

    # A server named beside the data dir is a usage error, not one of them quietly
    # ignored (the data dir's bucket exported where the server's was meant), as for
    # `bucketd orgs|keys`; a settings file names a data dir as --data-dir does.
    confused = str(tmp_path / "confused")
    server = ["--url", live.url, "--key", live.admin_key]
    for command in (
        ("export", source.id, confused, *server, *offline),
        ("export", source.id, confused, "--url", live.url, "--data-dir", str(live.data_dir)),
        ("import", confused, empty.id, "--key", live.admin_key, *offline),
        ("export", source.id, confused, "--url", live.url, "--config", str(live.config_path)),
    ):
        refused = bucketd(None, *command)
        assert refused.returncode == 2 and refused.stdout == "", (command, refused.stderr)
        assert refused.stderr.count("\n") == 1 and "one or the other" in refused.stderr
    assert not Path(confused).exists()

    target = tmp_path / "offline"
    exported = json.loads(ok(bucketd(None, "export", source.id, str(target), *offline, "--json")))
    assert exported["copied"] == 3
    assert tree(target) == {f"f/{i}.txt": f"file {i}".encode() for i in range(3)}
    imported = json.loads(ok(bucketd(None, "import", str(target), empty.id, *offline, "--json")))
    assert imported["copied"] == 3
    unknown = bucketd(None, "export", "svc_unknown", str(tmp_path / "y"), *offline)
    assert unknown.returncode == 1

    live.start()
    try:
        with bc.Client(live.url, live.admin_key) as client:
            assert [f.key for f in client.iter_files(empty.id)] == [f"f/{i}.txt" for i in range(3)]
            assert client.read(empty.id, "f/2.txt") == b"file 2"
            assert client.get_bucket(empty.id).size_bytes == sum(len(f"file {i}") for i in range(3))
    finally:
        live.stop()
    assert live.cli("check").strip().endswith("consistent")


def test_object_lock_commands(live: LiveServer, tmp_path: Path) -> None:
    name = unique_name("lk")
    created = ok(
        bucketd(
            live, "buckets", "create", name, "--object-lock", "--default-retention", "governance:2d"
        )
    )
    assert name in created
    doc = tmp_path / "doc.txt"
    doc.write_text("kept")
    ok(bucketd(live, "files", "put", name, str(doc)))
    listed = json.loads(ok(bucketd(live, "files", "versions", name, "doc.txt", "--json")))
    version = listed[0]["versionId"]
    assert listed[0]["retention"]["mode"] == "governance"
    assert "governance until" in ok(bucketd(live, "files", "versions", name, "doc.txt"))
    held = ok(bucketd(live, "files", "lock", name, "doc.txt", version, "--legal-hold", "on"))
    assert "legal hold" in held
    assert bucketd(live, "files", "rm", name, "doc.txt", "--version-id", version).returncode == 1
    shorter = bucketd(
        live, "files", "lock", name, "doc.txt", version, "--no-retention", "--bypass-governance"
    )
    assert shorter.returncode == 1  # the admin key lacks files:bypass-governance
    assert "compliance 1 years" in ok(
        bucketd(live, "buckets", "lock", name, "--default-retention", "compliance:1y")
    )
    assert bucketd(live, "buckets", "lock", name, "--default-retention", "1y").returncode != 0
    plain = unique_name()
    assert (
        bucketd(live, "buckets", "create", plain, "--default-retention", "governance:1d").returncode
        != 0
    )


def test_lifecycle_command(live: LiveServer, tmp_path: Path) -> None:
    name = unique_name("lc")
    ok(bucketd(live, "buckets", "create", name))
    rules = tmp_path / "rules.json"
    rules.write_text(
        '[{"id": "logs", "prefix": "logs/", "expirationDays": 30},'
        ' {"id": "scratch", "tags": {"env": "dev"}, "sizeGreaterThan": 10, "expirationDays": 1}]'
    )
    shown = ok(bucketd(live, "buckets", "lifecycle", name, "--rules", str(rules)))
    assert "logs" in shown and "expire after 30d" in shown
    scratch = next(line for line in shown.splitlines() if line.startswith("scratch"))
    assert "tag env=dev" in scratch and "size > 10" in scratch  # not "every object"
    rules.write_text('[{"id": "logs", "prefix": "logs/", "expirationDays": 30}]')
    ok(bucketd(live, "buckets", "lifecycle", name, "--rules", str(rules)))
    listed = json.loads(ok(bucketd(live, "buckets", "lifecycle", name, "--json")))
    assert [(r["id"], r["prefix"], r["expirationDays"]) for r in listed] == [("logs", "logs/", 30)]
    rules.write_text('[{"id": "logs"}]')
    assert bucketd(live, "buckets", "lifecycle", name, "--rules", str(rules)).returncode == 1
    rules.write_text('{"not": "a list"}')
    assert bucketd(live, "buckets", "lifecycle", name, "--rules", str(rules)).returncode != 0
    ok(bucketd(live, "buckets", "lifecycle", name, "--clear"))
    assert json.loads(ok(bucketd(live, "buckets", "lifecycle", name, "--json"))) == []


def test_tag_command(live: LiveServer, tmp_path: Path) -> None:
    name = unique_name("tg")
    ok(bucketd(live, "buckets", "create", name))
    doc = tmp_path / "doc.txt"
    doc.write_text("x")
    ok(bucketd(live, "files", "put", name, str(doc)))
    shown = ok(bucketd(live, "files", "tag", name, "doc.txt", "team=a", "stage=dev x"))
    assert "team" in shown and "dev x" in shown
    listed = json.loads(ok(bucketd(live, "files", "tag", name, "doc.txt", "--json")))
    assert listed == {"team": "a", "stage": "dev x"}
    assert bucketd(live, "files", "tag", name, "doc.txt", "aws:x=1").returncode == 1
    assert json.loads(ok(bucketd(live, "files", "tag", name, "doc.txt", "--clear", "--json"))) == {}


def test_encryption_command_and_ls_say_how_files_are_encrypted(
    live: LiveServer, tmp_path: Path
) -> None:
    name = unique_name("enc")
    created = json.loads(
        ok(bucketd(live, "buckets", "create", name, "--encryption", "AES256", "--json"))
    )
    assert created["encryption"] == "AES256"
    doc = tmp_path / "doc.txt"
    doc.write_text("x")
    ok(bucketd(live, "files", "put", name, str(doc), "--prefix", "s3-"))
    shown = ok(bucketd(live, "buckets", "encryption", name, "aws:kms/alpha"))
    assert "default encryption aws:kms/alpha" in shown
    ok(bucketd(live, "files", "put", name, str(doc), "--prefix", "kms-"))
    default_key = ok(bucketd(live, "buckets", "encryption", name, "aws:kms"))
    assert "aws:kms (the keyring's default key)" in default_key
    cleared = json.loads(ok(bucketd(live, "buckets", "encryption", name, "none", "--json")))
    assert cleared["encryption"] is None
    ok(bucketd(live, "files", "put", name, str(doc), "--prefix", "plain-"))

    listed = ok(bucketd(live, "files", "ls", name)).splitlines()
    assert listed[0].split() == ["UPLOADED", "SIZE", "TYPE", "ENCRYPTION", "KEY"]
    shown_as = {line.split()[-1]: line.split()[-2] for line in listed[1:]}
    assert shown_as == {
        "kms-doc.txt": "aws:kms/alpha",
        "plain-doc.txt": "-",
        "s3-doc.txt": "AES256",
    }
    as_json = json.loads(ok(bucketd(live, "files", "ls", name, "--json")))["files"]
    assert {f["key"]: (f["encryption"], f["kmsKeyId"]) for f in as_json} == {
        "kms-doc.txt": ("aws:kms", "alpha"),
        "plain-doc.txt": (None, None),
        "s3-doc.txt": ("AES256", None),
    }

    for refused, words in (("aws:kms/gamma", "gamma"), ("DES", "AES256, aws:kms")):
        answer = bucketd(live, "buckets", "encryption", name, refused)
        assert answer.returncode == 1 and words in answer.stderr, answer.stderr
    assert "no default encryption" in ok(bucketd(live, "buckets", "encryption", name))


def test_the_manifest_sits_beside_the_name_given(tmp_path: Path) -> None:
    """Beside the folder as it was named (a symbolic link's name, not its target's), and
    inside only where there is no beside (`/`)."""
    from bucketd_client.exchange import MANIFEST, manifest_path

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert manifest_path(tmp_path / "link") == tmp_path / f"link{MANIFEST}"
    assert manifest_path(tmp_path / "real" / "..") == tmp_path.parent / f"{tmp_path.name}{MANIFEST}"
    assert manifest_path(Path("/")) == Path("/") / MANIFEST

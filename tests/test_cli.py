"""The `bucketd` command line: first start, orgs and keys while serving, gc."""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import parser
from gateway.settings import load_settings
from tests.support import web
from tests.support.commands import bucketd, ok
from tests.support.live import ROOT, LiveServer

pytestmark = pytest.mark.slow  # a bucketd process per command


def test_first_start_prints_and_saves_the_admin_key(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    live.stop()
    log = live.log_path.read_text()
    key = (live.data_dir / "admin.key").read_text().strip()
    assert key.startswith("svc_") and len(key) >= 47
    assert key in log.splitlines()
    assert stat.S_IMODE(os.stat(live.data_dir / "admin.key").st_mode) == 0o600
    live.start()
    try:
        with live.client() as http:
            org = http.get("/organization").json()["data"]
            assert org["name"] == "default" and org["plan"] == "pro"
            keys = http.get("/keys").json()["data"]
            assert len(keys) == 1 and set(keys[0]["scopes"]) == {
                "buckets:read",
                "buckets:write",
                "files:read",
                "files:write",
                "keys:manage",
                "orgs:manage",  # the operator's: the admin key is the operator's key
            }
    finally:
        live.stop()
    second_log = live.log_path.read_text()[len(log) :]
    assert key not in second_log and "admin.key" in second_log


def test_lost_admin_key_is_not_replaced(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    live.stop()
    (live.data_dir / "admin.key").unlink()
    live.start()
    live.stop()
    assert not (live.data_dir / "admin.key").exists()


def test_orgs_and_keys_created_while_serving_work_at_once(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    try:
        org_id = live.cli("orgs", "create", "acme", "--plan", "free").strip().splitlines()[-1]
        assert org_id.startswith("svc_") and len(org_id) == 30
        secret = (
            live.cli(
                "keys",
                "create",
                "--org",
                org_id,
                "--scopes",
                "buckets:read,buckets:write",
                "--name",
                "ci",
            )
            .strip()
            .splitlines()[-1]
        )
        assert secret.startswith("svc_")
        with live.client(secret) as http:
            org = http.get("/organization").json()["data"]
            assert org["id"] == org_id and org["plan"] == "free"
            assert http.get("/organization").headers["x-ratelimit-limit"] == "100"
            assert http.get("/buckets").status_code == 200
            assert http.get("/keys").status_code == 403
    finally:
        live.stop()


def test_cli_errors_exit_non_zero(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", *args, "--data-dir", str(tmp_path / "d")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    assert run("orgs", "create", "x", "--plan", "gold").returncode != 0
    backup = ("backup", str(tmp_path / "copy"))
    on_a_data_dir = (("keys", "list", "--org", "default"), ("orgs", "list"), ("gc",), ("check",))
    for command in (*on_a_data_dir, backup):
        nowhere = run(*command)  # run from the wrong folder: refused, nothing made
        assert nowhere.returncode == 2 and "no data dir at" in nowhere.stderr, command
        assert not (tmp_path / "d").exists() and not (tmp_path / "copy").exists()
    (tmp_path / "d").mkdir()  # an existing folder that holds no index: still nothing made
    for command in (*on_a_data_dir, backup):
        empty = run(*command)
        assert empty.returncode == 2 and "holds no bucketd index" in empty.stderr, command
        assert list((tmp_path / "d").iterdir()) == [] and not (tmp_path / "copy").exists()
    ok(bucketd(None, "orgs", "create", "acme", "--plan", "free", "--data-dir", str(tmp_path / "d")))
    bad_scope = run("keys", "create", "--org", "svc_00000000000000000000000000", "--scopes", "root")
    assert bad_scope.returncode == 1 and "scopes" in bad_scope.stderr
    missing_org = run(
        "keys", "create", "--org", "svc_00000000000000000000000000", "--scopes", "files:read"
    )
    assert missing_org.returncode == 1 and "organization" in missing_org.stderr


def test_gc_removes_temp_files_and_orphan_blobs_but_not_while_serving(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    with live.client() as http:
        bucket = http.post("/buckets", json={"name": "gc-me", "region": "us-east-1"}).json()["data"]
        import time

        time.sleep(0.3)
        http.put(
            f"/buckets/{bucket['id']}/files/kept",
            content=b"kept",
            headers={"Content-Type": "text/plain"},
        )
    busy = subprocess.run(
        [sys.executable, "-m", "gateway", "gc", "--data-dir", str(live.data_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert busy.returncode == 1 and "another bucketd process" in busy.stderr
    live.stop()
    (live.data_dir / "tmp" / "leftover.part").write_bytes(b"half an upload")
    checked = live.cli("check").splitlines()  # a leftover is information, not a problem
    assert checked[-1] == "consistent" and checked[0].startswith("note: temp file leftover.part")
    orphan = live.data_dir / "blobs" / "ab" / "cd" / ("abcd" + "0" * 60)
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"nobody")
    out = live.cli("gc")
    assert "removed 1 temp files and 1 unreferenced blobs" in out
    assert not orphan.exists()
    live.start()
    try:
        with live.client() as http:
            assert http.get(f"/buckets/{bucket['id']}/files/kept").content == b"kept"
    finally:
        live.stop()


def test_start_up_cleans_leftovers(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    live.kill()
    (live.data_dir / "tmp" / "crash.part").write_bytes(b"x")
    live.start()
    try:
        assert list((live.data_dir / "tmp").iterdir()) == []
        assert web.get(live.url + "/healthz").status_code == 200
    finally:
        live.stop()


def test_second_server_on_the_same_data_dir_refuses(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--port",
                "0",
                "--data-dir",
                str(live.data_dir),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=30,
        )
        assert result.returncode == 1 and "another bucketd process" in result.stderr
    finally:
        live.stop()


def test_an_index_from_a_newer_bucketd_is_refused(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    live.stop()
    with sqlite3.connect(live.data_dir / "index.db") as conn:
        conn.execute("INSERT INTO schema_migrations (version) VALUES (9999)")
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--data-dir", str(live.data_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 1
    assert "schema version 9999, newer than this bucketd knows" in result.stderr


def test_contrib_files_match_the_cli_and_settings() -> None:
    load_settings(ROOT / "contrib" / "bucketd.toml.example")
    unit = (ROOT / "contrib" / "bucketd.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    command = shlex.split(exec_start.removeprefix("ExecStart="))
    assert command[0].endswith("/bucketd")
    args = parser().parse_args(command[1:])
    assert args.command == "serve" and args.data_dir == "/var/lib/bucketd/data"


def test_the_systemd_unit_verifies_and_signals_the_supervisor_alone(tmp_path: Path) -> None:
    """`systemd-analyze verify` (Debian's systemd is installed by the image this runs on;
    the unit's ExecStart is pointed at this checkout's bucketd, which exists here), and
    KillMode=mixed: SIGTERM to the supervisor alone, which stops its workers in order."""
    unit = (ROOT / "contrib" / "bucketd.service").read_text()
    assert "\nKillMode=mixed\n" in unit and "\nKillSignal=SIGTERM\n" in unit
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    here = unit.replace("/opt/bucketd/bin/bucketd", str(Path(sys.executable).parent / "bucketd"))
    (tmp_path / "bucketd.service").write_text(here)
    result = subprocess.run(
        [analyze, "verify", str(tmp_path / "bucketd.service")], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_admin_commands_load_neither_the_http_client_nor_the_server(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from gateway.cli import main\n"
        "main(['orgs', 'create', 'acme', '--plan', 'free', '--data-dir', sys.argv[1]])\n"
        "loaded = {'httpx', 'bucketd_client.client', 'bucketd_client.aio'}\n"
        "loaded |= {'starlette', 'uvicorn'}\n"
        "print(sorted(loaded & set(sys.modules)))\n"
    )
    (tmp_path / "data").mkdir()  # a data-dir command makes none of its own
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.splitlines()[-1] == "[]"


def test_sizes_and_retries_read_as_a_person_writes_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gateway.cli.remote import RETRY
    from gateway.cli.terminal import parse_size

    sizes = ["1048576", "10MiB", "10 mib", "5G", "5GB", "1.5k", "2KiB"]
    assert [parse_size(text) for text in sizes] == [
        1 << 20,
        10 << 20,
        10 << 20,
        5 * 10**9,
        5 * 10**9,
        1500,
        2048,
    ]
    for nonsense in ("", "ten", "5X", "-1", "4i"):
        with pytest.raises(ValueError):
            parse_size(nonsense)
    assert RETRY.notify is not None
    RETRY.notify(429, 3.0)
    RETRY.notify(None, 0.25)
    assert capsys.readouterr().err.splitlines() == [
        "bucketd: rate limited; retrying in 3 s",
        "bucketd: no answer; retrying in 0.2 s",
    ]


def test_orgs_and_keys_listed_moved_and_revoked_by_name(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "gateway", *args, "--data-dir", str(live.data_dir)]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)

    try:
        made = run("orgs", "create", "acme", "--plan", "free")
        assert made.returncode == 0, made.stderr
        org_id = made.stdout.splitlines()[-1]
        again = run("orgs", "create", "acme", "--plan", "pro")
        assert again.returncode == 2 and f"exists already ({org_id}, free plan)" in again.stderr
        listed = run("orgs", "list").stdout.splitlines()
        assert listed[0].split() == ["ID", "PLAN", "NAME"]
        assert [line.split() for line in listed][-1] == [org_id, "free", "acme"]
        assert "on the pro plan" in run("orgs", "set-plan", "acme", "pro").stdout
        scopes = "buckets:read,buckets:write"
        created = run("keys", "create", "--org", "acme", "--scopes", scopes, "--s3")
        access, secret = created.stdout.splitlines()[-1].split()
        keys = run("keys", "list", "--org", "acme").stdout
        assert keys.splitlines()[0].split() == ["ID", "STATE", "NAME", "SCOPES", "CREDENTIAL"]
        assert "active" in keys and f"S3 {access}" in keys
        with live.client() as http:
            assert http.get("/organization").status_code == 200
        s3 = live.s3(access, secret)
        assert s3.list_buckets()["Buckets"] == []
        s3.create_bucket(Bucket="tour")
        narrow = run("keys", "create", "--org", "acme", "--scopes", scopes, "--bucket", "tour")
        assert narrow.returncode == 0, narrow.stderr
        with live.client(narrow.stdout.splitlines()[-1]) as http:
            assert [b["name"] for b in http.get("/buckets").json()["data"]] == ["tour"]
        revoked = run("keys", "revoke", access)
        assert revoked.returncode == 0 and "revoked key" in revoked.stdout
        assert "revoked" in run("keys", "list", "--org", org_id).stdout
        unknown = run("keys", "list", "--org", "nobody")
        assert unknown.returncode == 2 and "bucketd orgs list" in unknown.stderr
    finally:
        live.stop()


@pytest.mark.anyio
async def test_an_organization_name_two_share_is_refused_for_its_ids(tmp_path: Path) -> None:
    from gateway.cli.account_engine import org_id
    from gateway.cli.errors import UsageError
    from storage.config import EngineConfig
    from storage.engine import Engine

    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        first = await engine.orgs.create("twin", "free")  # an older data dir may hold these
        second = await engine.orgs.create("twin", "pro")
        alone = await engine.orgs.create("alone", "free")
        assert await org_id(engine, "alone") == alone.id
        with pytest.raises(UsageError) as ambiguous:
            await org_id(engine, "twin")
        assert f"({first.id}, {second.id}); give the id" in str(ambiguous.value)
    finally:
        await engine.close()


def test_a_reader_that_leaves_early_is_no_traceback(tmp_path: Path) -> None:
    """`bucketd orgs list | head -1`: the pipe closes under the command; it stops with
    SIGPIPE's status (141) and says nothing (a BrokenPipeError traceback before)."""
    data = str(tmp_path / "data")
    (tmp_path / "data").mkdir()
    for n in range(3):
        ok(bucketd(None, "orgs", "create", f"org-{n}", "--plan", "free", "--data-dir", data))
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "orgs", "list", "--data-dir", data],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # gone before the first line is written
    said = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(30) == 141
    assert said == ""

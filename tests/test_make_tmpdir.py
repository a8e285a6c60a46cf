"""`make test` and `make test-fast` put the tests' temporary folders on tmpfs where there is
room (the Makefile's TEST_TMPDIR): what make would run, read with `make -n`, and the
folder's guard run as make runs it."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RETENTION = "-o tmp_path_retention_policy=failed"


def planned(*variables: str, tmpdir: str | None = None) -> list[str]:
    """The pytest command lines of `make -n test test-fast`, with the environment's TMPDIR
    (and the calling make's flags) left out unless `tmpdir` is given."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("TMPDIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "test", "test-fast", *variables],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in result.stdout.splitlines() if "-m pytest -n" in line]
    assert len(lines) == 2, result.stdout
    return lines


def guard(shm: Path) -> subprocess.CompletedProcess[str]:
    """The folder's guard, the line `make test` runs before pytest."""
    plan = subprocess.run(
        ["make", "-n", "--no-print-directory", "test", f"SHM={shm}", "SHM_MIN_KB=1"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("TMPDIR", "MAKEFLAGS")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in plan.splitlines() if line.startswith("mkdir -p "))
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True)


def test_a_tmpfs_with_room_holds_the_folders_and_keeps_only_failed_ones(tmp_path: Path) -> None:
    folder = f"{tmp_path}/bucketd-tests-{os.getuid()}"
    for line in planned(f"SHM={tmp_path}", "SHM_MIN_KB=1"):
        assert line.startswith(f"TMPDIR={folder} "), line
        assert RETENTION in line


@pytest.mark.parametrize(
    ("variables", "tmpdir"),
    [
        (("SHM_MIN_KB=1",), "/var/tmp"),  # the user's own TMPDIR
        (("SHM_MIN_KB=1" + "0" * 15,), None),  # less room than asked for
        (("SHM=/nonexistent/shm", "SHM_MIN_KB=1"), None),  # no tmpfs at all
    ],
)
def test_otherwise_the_folders_stay_where_tmpdir_says(
    tmp_path: Path, variables: tuple[str, ...], tmpdir: str | None
) -> None:
    shm = () if any(v.startswith("SHM=") for v in variables) else (f"SHM={tmp_path}",)
    for line in planned(*shm, *variables, tmpdir=tmpdir):
        assert "TMPDIR=" not in line and RETENTION not in line, line


def test_the_folder_is_made_for_this_user_alone(tmp_path: Path) -> None:
    done = guard(tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / f"bucketd-tests-{os.getuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)  # made before, with a looser mode: tightened
    assert guard(tmp_path).returncode == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_link_in_its_place_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (tmp_path / f"bucketd-tests-{os.getuid()}").symlink_to(elsewhere)
    done = guard(tmp_path)
    assert done.returncode != 0
    assert re.search(r"is not this user's own folder", done.stderr)
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="gives the folder to another user: root only")
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / f"bucketd-tests-{os.getuid()}"
    theirs.mkdir()
    theirs.chmod(0o777)
    os.chown(theirs, 65534, 65534)
    done = guard(tmp_path)
    assert done.returncode != 0, done.stdout
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o777

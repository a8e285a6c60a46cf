"""The power-loss tests' file system (tests/support/lazyfs.py) forgets exactly what was not
synced: a file's contents until its fsync, a directory's entries until the directory's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import lazyfs
from tests.support.lazyfs import LazyFS


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[LazyFS]:
    with LazyFS(tmp_path / "disk", tmp_path / "mnt") as mounted:
        yield mounted


def write(path: Path, data: bytes, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def power_cut(fs: LazyFS, keep: int | None = None) -> Path:
    fs.cut(keep)
    fs.remount()
    return fs.mountpoint


def test_a_write_without_fsync_is_gone_and_one_with_fsync_stays(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    write(mnt / "kept", b"synced", sync=True)
    write(mnt / "lost", b"never synced", sync=False)
    sync_dir(mnt)  # both names are durable; only one file's contents are
    with (mnt / "kept").open("ab") as handle:
        handle.write(b" and more")  # written after the fsync: gone
    assert (mnt / "lost").read_bytes() == b"never synced"  # the process sees it all
    mnt = power_cut(fs)
    assert (mnt / "kept").read_bytes() == b"synced"
    assert (mnt / "lost").read_bytes() == b""


def test_a_new_file_needs_its_directory_synced(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    (mnt / "sub").mkdir()
    write(mnt / "sub" / "file", b"data", sync=True)
    sync_dir(mnt / "sub")  # the name is in sub, but sub itself is not in the root yet
    mnt = power_cut(fs)
    assert not (mnt / "sub").exists()
    (mnt / "sub").mkdir()
    sync_dir(mnt)
    write(mnt / "sub" / "file", b"data", sync=True)
    sync_dir(mnt / "sub")
    mnt = power_cut(fs)
    assert (mnt / "sub" / "file").read_bytes() == b"data"


def test_a_rename_is_undone_unless_the_directory_is_synced(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    write(mnt / "old", b"contents", sync=True)
    sync_dir(mnt)
    os.rename(mnt / "old", mnt / "new")
    mnt = power_cut(fs)
    assert sorted(os.listdir(mnt)) == ["old"]
    os.rename(mnt / "old", mnt / "new")
    sync_dir(mnt)
    mnt = power_cut(fs)
    assert sorted(os.listdir(mnt)) == ["new"]
    assert (mnt / "new").read_bytes() == b"contents"


def test_an_unlink_is_undone_unless_the_directory_is_synced(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"x", sync=True)
    sync_dir(mnt)
    (mnt / "f").unlink()
    mnt = power_cut(fs)
    assert (mnt / "f").read_bytes() == b"x"


def test_a_torn_write_keeps_a_prefix(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"synced|", sync=True)
    sync_dir(mnt)
    with (mnt / "f").open("r+b") as handle:
        handle.seek(7)
        handle.write(b"0123456789")
    mnt = power_cut(fs, keep=4)
    assert (mnt / "f").read_bytes() == b"synced|0123"


def test_a_clean_unmount_keeps_everything_and_a_cut_stops_every_call(fs: LazyFS) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"not synced", sync=False)
    os.link(mnt / "f", mnt / "g")
    fs.remount()
    assert (mnt / "f").read_bytes() == (mnt / "g").read_bytes() == b"not synced"
    fs.cut()
    with pytest.raises(OSError) as failed:
        (mnt / "f").read_bytes()
    assert failed.value.errno == 5  # EIO: nothing written after the cut can land


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, "found"),
        ({"FUSE_LIBRARY_PATH": ""}, "found"),
        ({"FUSE_LIBRARY_PATH": "/opt/libfuse3.so.3"}, "/opt/libfuse3.so.3"),
        ({"FUSE_LIBRARY_NAME": "fuse"}, None),
    ],
)
def test_the_mount_process_is_told_libfuse_3_unless_the_user_names_a_library(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, str], expected: str | None
) -> None:
    """The path found once is handed to each mount's process; a library the user names, by
    path or by name, is left to mfusepy; the rest of the environment is this one's, read at
    each mount."""
    monkeypatch.setattr(lazyfs, "_libfuse", lambda: "found")
    for name in ("FUSE_LIBRARY_PATH", "FUSE_LIBRARY_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BUCKETD_LAZYFS_PROBE", "1")
    env = lazyfs._process_env()
    assert env.get("FUSE_LIBRARY_PATH") == expected
    assert env["BUCKETD_LAZYFS_PROBE"] == "1"
    assert {k: v for k, v in env.items() if k != "FUSE_LIBRARY_PATH"} == {
        k: v for k, v in os.environ.items() if k != "FUSE_LIBRARY_PATH"
    }


def test_libfuse_3_is_found_on_a_machine_make_test_prepared() -> None:
    """What `make test` installs (fuse3) is what the search finds: a None here would leave
    every mount to search again."""
    assert lazyfs._libfuse() is not None

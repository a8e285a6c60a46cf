"""The machine's limits for the data dir's disk: sequential write with fsync, and read."""

from __future__ import annotations

import os
import time
from pathlib import Path

CHUNK = 1024 * 1024


def make_file(path: Path, size: int) -> None:
    """A file of incompressible bytes, written and flushed to disk without timing."""
    with open(path, "wb") as handle:
        for _ in range(size // CHUNK):
            handle.write(os.urandom(CHUNK))
        handle.flush()
        os.fsync(handle.fileno())


def settle() -> bool:
    """Flush dirty pages and drop the page cache, so the next measure starts cold.

    Dropping needs root; without it only the flush happens (and False is returned).
    """
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def write_rate(source: Path, directory: Path) -> float:
    """MB/s of `dd if=source of=new bs=1M conv=fsync` on the data dir's disk, cold cache."""
    target = directory / "rawdisk-write.bin"
    size = source.stat().st_size
    buffer = bytearray(CHUNK)
    settle()
    started = time.perf_counter()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with open(source, "rb", buffering=0) as handle:
            while count := handle.readinto(buffer):
                os.write(fd, memoryview(buffer)[:count])
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    target.unlink()
    return size / elapsed / 1e6


def read_rate(path: Path) -> float:
    """MB/s of reading a file sequentially in 1 MiB reads, from a cold cache where allowed."""
    size = path.stat().st_size
    buffer = bytearray(CHUNK)
    settle()
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(buffer):
            pass
    return size / (time.perf_counter() - started) / 1e6

"""Peak memory and CPU time of a running process, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM (Linux >= 4.0); False where the kernel does not allow it."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The process's child processes (of any of its threads)."""
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its children, theirs included (a server's helper
    processes serve its requests too)."""
    total = cpu_seconds(pid)
    for child in children(pid):
        try:
            total += tree_cpu_seconds(child)
        except FileNotFoundError:  # ended meanwhile
            pass
    return total


def tree_bytes_read(pid: int) -> int:
    """Bytes a process and its children have read so far (`rchar` of /proc/<pid>/io: every
    read, preadv and recv, page cache or not)."""
    total = 0
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            total += int(line.split()[1])
    for child in children(pid):
        try:
            total += tree_bytes_read(child)
        except FileNotFoundError:
            pass
    return total

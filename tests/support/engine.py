"""Driving the engine in process: bodies as async chunks, open blobs."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

from tests.support.live import LiveServer


def open_blobs(live: LiveServer) -> list[str]:
    """Blob files the server's processes hold open."""
    assert live.process is not None
    pids = [live.process.pid]
    children = Path(f"/proc/{pids[0]}/task/{pids[0]}/children")
    pids += [int(pid) for pid in children.read_text().split()]
    found = []
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if "/blobs/" in target:
                found.append(target)
    return found


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 1000):
        yield data[i : i + 1000]

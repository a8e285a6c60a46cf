"""Imported by the forkserver of `tests/support/launch.py` (its preload) when
`BUCKETD_TEST_CPU` is set: the forkserver reaps its children with `os.waitpid(-1,
WNOHANG)`; here that call becomes an `os.wait4`, whose resource usage of each child is
written down (`tests/support/cpustats.py`). The forks inherit the module and keep the
plain `os.waitpid`."""

from __future__ import annotations

import os

from tests.support import cpustats

_waitpid = os.waitpid
_forkserver = os.getpid()


def _waitpid_counted(pid: int, options: int) -> tuple[int, int]:
    if os.getpid() != _forkserver:
        return _waitpid(pid, options)
    child, status, usage = os.wait4(pid, options)
    if child:
        cpustats.reaped(child, usage.ru_utime, usage.ru_stime)
    return child, status


if cpustats.folder() is not None:
    os.waitpid = _waitpid_counted

"""An earlier run's temporary folders are deleted while this run's tests run, not after them.

pytest keeps the last three runs' folders (`tmp_path_retention_count`) and deletes older
ones when a session ends. A run of this suite leaves 3 GB in 50,000 files (the shared
PostgreSQL's 130-odd databases, the scale-out cluster, the shared servers): deleting one
took 5.9 s at the end of each `make test` on a machine that had run it before, waiting on
the disk (1.4 s of CPU). The same deletion, with pytest's own function and arguments, runs
here in a thread from the session's start, and the session's end waits for it; pytest's
own cleanup then finds nothing left to delete."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest


def delete_earlier_runs(config: pytest.Config) -> Callable[[], None] | None:
    """In the process that owns the run's numbered folder (not an xdist worker, not with
    `--basetemp`): start deleting what pytest would delete at the end; returns the wait."""
    factory = getattr(config, "_tmp_path_factory", None)
    if (
        factory is None
        or config.option.basetemp
        or config.option.collectonly  # makes no folder (`make test` primes its caches so)
        or hasattr(config, "workerinput")
    ):
        return None
    try:  # pytest's own rule, so that the two can never disagree on what to keep
        from _pytest.pathlib import LOCK_TIMEOUT, cleanup_numbered_dir
    except ImportError:
        return None
    basetemp = factory.getbasetemp()
    keep = int(config.getini("tmp_path_retention_count"))
    if config.getini("tmp_path_retention_policy") == "none":
        keep = 0
    thread = threading.Thread(
        target=cleanup_numbered_dir,
        args=(basetemp.parent, "pytest-", keep, basetemp.stat().st_mtime - LOCK_TIMEOUT),
        name="delete-earlier-runs",
        daemon=True,
    )
    thread.start()
    return thread.join

"""Test-only fault injection at named points of the engine. Off unless configured.

The spec is `point=action[,point=action...]`, given to the engine at start-up (the CLI
reads it from the `BUCKETD_FAULTS` environment variable; no API reaches it). Actions:
`raise` (RuntimeError), `enospc` (OSError ENOSPC), `kill` (SIGKILL of this process) and
`sleep:SECONDS`. Points are named where `hit` is called, e.g. `put.after_blob`. Each point
reached says so in the log (info), so that a test acts at that moment instead of guessing
when it comes.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time

logger = logging.getLogger("bucketd.faults")


class Faults:
    def __init__(self, spec: str = "") -> None:
        self._actions: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            point, _, action = item.partition("=")
            self._actions[point.strip()] = action.strip()

    def arm(self, point: str, action: str | None) -> None:
        """Set `point`'s action (None: none) while running, for a test driving an engine in
        its own process."""
        if action is None:
            self._actions.pop(point, None)
        else:
            self._actions[point] = action

    def __bool__(self) -> bool:
        return bool(self._actions)

    def hit(self, point: str) -> None:
        action = self._actions.get(point)
        if action is None:
            return
        logger.info("fault point %s reached: %s", point, action)
        if action == "raise":
            raise RuntimeError(f"injected fault at {point}")
        if action == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if action.startswith("sleep:"):
            time.sleep(float(action.split(":", 1)[1]))

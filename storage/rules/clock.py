"""Timestamps as the index stores them: UTC `YYYY-MM-DDTHH:MM:SSZ`."""

from __future__ import annotations

import time
from datetime import datetime


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def unix_to_iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def iso_to_unix(value: str) -> int:
    """Seconds since the epoch of a stored `...Z` timestamp (fromisoformat is C-fast)."""
    return int(datetime.fromisoformat(value).timestamp())

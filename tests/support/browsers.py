"""Chromium, headless: Debian's chromium-headless-shell, the "old" headless mode that
Playwright itself launches for headless tests. The full browser's headless mode (`chromium
--headless`) runs the whole browser, compositor included: test_console.py spent 31 s of CPU
in its processes against 20 s in the shell's, the same 23 tests passing (process accounting,
two runs each, 2026-11-27). The full browser is used when it is the only one installed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import pytest

CHROMIUM = (
    os.environ.get("BUCKETD_CHROMIUM")
    or shutil.which("chromium-headless-shell")
    or shutil.which("chromium")
    or "/usr/bin/chromium-headless-shell"
)


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
]

DIAGNOSIS = pytest.StashKey[Callable[[], str]]()
"""What a browser test's failure report adds (tests/conftest.py `pytest_runtest_makereport`):
a stalled page's requests and its server's log, read when the test has failed."""

"""Chromium, headless."""

from __future__ import annotations

import os
import shutil

CHROMIUM = os.environ.get("BUCKETD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


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

"""Keys that are hard to carry through HTTP and the backends."""

from __future__ import annotations

from urllib.parse import quote

ODD_KEYS = [
    "..",
    ".",
    "./a",
    "a/./b",
    "a/../b",
    "//",
    "/",
    "/lead",
    "trail/",
    "a//b",
    "%00",
    ".bucketd-keys/a",
    ".bucketd-versions/v/a",
    "日本/語/" + "é" * 200,
    "x" * 1024,
    "y/" * 511 + "z",
    "/" * 1024,
]
"""Keys a file-system-backed cluster would alter: the S3 backend stores them under other
names (`storage/backends/s3/names.py`); the API must not be able to tell."""


def odd_path(key: str) -> str:
    """A key in a /v1 path, with every character a URL would fold percent-encoded."""
    return quote(key, safe="").replace(".", "%2E")

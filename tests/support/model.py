"""An in-memory model of a bucket's listing (S3 rules), shared by property tests."""

from __future__ import annotations


def model_listing(keys: set[str] | dict[str, bytes], prefix: str, delimiter: str) -> list[str]:
    """Every entry a full listing yields: keys and common prefixes, in code-point order."""
    entries = set()
    for key in keys:
        if not key.startswith(prefix):
            continue
        at = key.find(delimiter, len(prefix)) if delimiter else -1
        entries.add(key[: at + len(delimiter)] if at >= 0 else key)
    return sorted(entries)

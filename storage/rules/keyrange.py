"""Ordering helpers for keys compared as UTF-8 bytes (code-point order)."""

from __future__ import annotations

_SURROGATES_START = 0xD800
_SURROGATES_END = 0xDFFF
_MAX = 0x10FFFF


def successor(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with `prefix`.

    None when no such string exists (the prefix is made only of the largest code point).
    Surrogates are skipped: they cannot occur in UTF-8 keys or be bound as SQL text.
    """
    while prefix:
        last = ord(prefix[-1])
        if last < _MAX:
            nxt = last + 1
            if _SURROGATES_START <= nxt <= _SURROGATES_END:
                nxt = _SURROGATES_END + 1
            return prefix[:-1] + chr(nxt)
        prefix = prefix[:-1]
    return None


def common_prefix(key: str, prefix: str, delimiter: str) -> str | None:
    """The S3 common prefix `key` rolls up into under `delimiter`, or None."""
    if not delimiter:
        return None
    at = key.find(delimiter, len(prefix))
    if at < 0:
        return None
    return key[: at + len(delimiter)]
